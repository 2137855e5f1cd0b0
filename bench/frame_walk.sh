#!/usr/bin/env bash
# frame_walk.sh [TREE] [DEPTH]: how far a reader walks to follow a depth
# frame to its pose on the live path (issue 28). GNU cflow's call tree of
# pipeline.c's track_frame to DEPTH levels (default 3: the frame's steps,
# what each calls, and one more), keeping the project's functions above the
# ground floor (core/ is the reader's vocabulary, not a stop). Prints the
# stops (calls), the files they are in, how often the walk enters
# pipeline.c, and the tree. Needs cflow (apt-get install cflow).
#
#   bench/frame_walk.sh . 3
set -eu
TREE=${1:-.}
DEPTH=${2:-3}
command -v cflow >/dev/null || {
    echo "frame_walk.sh: cflow not found: apt-get install cflow" >&2
    exit 2
}
cd "$TREE"
mapfile -t files < <(find core pipeline fusion capture gpu transport eval -name '*.c' \
    ! -name '*_nocuda.c' 2>/dev/null)
walk=$(cflow --omit-arguments --no-main -d "$DEPTH" -m track_frame -i _ -I include -I . \
    "${files[@]}" 2>/dev/null | grep -o '^ *[A-Za-z_0-9]*() <[^>]* at [^:]*' |
    sed 's/<.* at /@/' | grep -v '@\(core/\|\./core/\|/usr\|include/\)' || true)
[ -n "$walk" ] || {
    echo "frame_walk.sh: no track_frame found under $TREE" >&2
    exit 1
}
echo "stops: $(wc -l <<<"$walk")  files: $(sed 's/.*@//' <<<"$walk" | sort -u | wc -l)" \
    " pipeline.c entries: $(grep -c '@pipeline/pipeline.c' <<<"$walk")"
echo "$walk"
