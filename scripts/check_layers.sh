#!/usr/bin/env bash
# The layering check (docs/DESIGN.md §3): fails when a file includes or calls
# into a layer it may not use, reaches into another room's private header,
# includes CUDA outside CUDA sources, or when files (or rooms) call each other
# in a circle.
#
#   scripts/check_layers.sh [--objects DIR] [--program DIR --library LIB] [ROOT]
#
# ROOT is the source tree (default: this script's checkout). Layers are the
# top-level folders (core, gpu, capture, …); a room is any folder of sources
# inside them (pipeline/track, pipeline/refine, …; a layer's own top folder is
# a room too). Every #include of a project header in the library's folders,
# the program and the public headers is checked:
#   - against the layer table below;
#   - a private header (NAME_internal.h) only from its own room;
#   - a room never includes a header of a room that holds it (pipeline/ composes
#     pipeline/track/, not the reverse), and rooms include each other in no
#     circle;
#   - CUDA's headers and .cuh headers only from .cu and .cuh files;
#   - the program (tools/) only the public API (kinreg/*.h) and its own headers.
# With --objects DIR (the library's object files,
# build/CMakeFiles/kinreg_objects.dir), the calls are checked too: each
# object's undefined symbols are matched to the object that defines them, so a
# call without an include (a hand-written prototype) is caught, and the
# file-level call graph must have no cycle. With --program DIR (the program's
# object files, build/CMakeFiles/kinreg_tool.dir) and --library LIB (the
# shared libkinreg), every library function the program calls must be
# exported by LIB (the public API), not a hidden one. Objects whose source no
# longer exists (left behind by a move) are ignored.
#
# Exit status: 0 clean, 1 violations (one line each), 2 usage error.
set -euo pipefail

# ---- the layers -------------------------------------------------------------
# folder: the folders it may use besides itself. From the ground up: core/
# uses nothing of the project; gpu/ (the compute engine: devices, the CUDA
# context, the k-d tree's device twin), capture/, transport/ and eval/ use
# only core/; fusion/ (the running model) may also compute through the
# engine; pipeline/ (the steps in their rooms, and their composition) uses
# them all but eval/; tools/ is the program on top.
declare -A may_use=(
    [core]=""
    [gpu]="core"
    [capture]="core"
    [transport]="core"
    [eval]="core"
    [fusion]="core gpu"
    [pipeline]="core gpu capture fusion transport"
    [tools]="core gpu capture fusion transport eval pipeline"
)
layer_folders="core gpu capture transport eval fusion pipeline tools"

# Public headers belong to the layer that implements them.
declare -A public_layer=(
    [status.h]=core [pose.h]=core [horn.h]=core [kdtree.h]=core [frame.h]=core
    [pyramid.h]=core [trajectory.h]=core [queue.h]=core
    [device.h]=gpu
    [source.h]=capture [kinect.h]=capture [recorder.h]=capture [scan.h]=capture
    [transport.h]=transport
    [eval.h]=eval
    [model.h]=fusion [surface.h]=fusion
    [preprocess.h]=pipeline [track.h]=pipeline [pipeline.h]=pipeline [register.h]=pipeline
    [refine.h]=pipeline
)

# ---- arguments --------------------------------------------------------------
objects=""
program=""
library=""
root=""
while [ $# -gt 0 ]; do
    case "$1" in
    --objects | --program | --library)
        [ $# -ge 2 ] || { echo "check_layers: $1 needs a path" >&2; exit 2; }
        case "$1" in
        --objects) objects=$2 ;;
        --program) program=$2 ;;
        --library) library=$2 ;;
        esac
        shift 2
        ;;
    -h | --help)
        sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*)
        echo "check_layers: unknown option $1 (see --help)" >&2
        exit 2
        ;;
    *)
        root=$1
        shift
        ;;
    esac
done
[ -n "$root" ] || root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -d "$root" ] || { echo "check_layers: no such source tree: $root" >&2; exit 2; }
for d in "$objects" "$program"; do
    if [ -n "$d" ] && [ ! -d "$d" ]; then
        echo "check_layers: no such object directory: $d (build the library and program first)" >&2
        exit 2
    fi
done
if [ -n "$program" ] && { [ -z "$library" ] || [ -z "$objects" ]; }; then
    echo "check_layers: --program needs --objects (the library's objects) and --library" >&2
    exit 2
fi
if [ -n "$library" ] && [ ! -f "$library" ]; then
    echo "check_layers: no such library: $library (build it first)" >&2
    exit 2
fi
cd "$root"

violations=0
say() {
    echo "check_layers: $*"
    violations=$((violations + 1))
}

allowed() { # allowed FROM TO
    [ "$1" = "$2" ] && return 0
    case " ${may_use[$1]} " in *" $2 "*) return 0 ;; esac
    return 1
}

# Every top-level folder with C or CUDA sources must have a place in the table.
for d in */; do
    d=${d%/}
    case "$d" in include | tests | bench | docs | scripts | build* | out) continue ;; esac
    compgen -G "$d/*.[ch]" >/dev/null || compgen -G "$d/*.cu" >/dev/null || continue
    [ -n "${may_use[$d]+x}" ] ||
        say "folder $d/ holds sources but has no layer: add it to the table in scripts/check_layers.sh and docs/DESIGN.md §3"
done

# ---- includes ---------------------------------------------------------------
# The layer of an included project header in $target, or "" for a system
# header or one beside the including file (no subshell: this runs for every
# include line).
header_layer() { # header_layer INCLUDED_PATH
    case "$1" in
    kinreg/*)
        local h=${1#kinreg/}
        target=${public_layer[$h]-?}
        ;;
    */*) target=${1%%/*} ;;
    *) target="" ;;
    esac
}

files=0
include_lines=0
room_edges=$(mktemp)
trap 'rm -f "$room_edges"' EXIT
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)"'
check_file() { # check_file PATH LAYER
    local path=$1 layer=$2 line n inc room inc_room cuda_source=false
    case "$path" in *.cu | *.cuh) cuda_source=true ;; esac
    room=${path%/*}
    files=$((files + 1))
    while IFS=: read -r n line; do
        include_lines=$((include_lines + 1))
        case "$line" in
        *'<cuda'* | *'<cublas'* | *'<cufft'* | *'<curand'* | *'<cusparse'* | *'<cusolver'* | *'<cub/'*)
            $cuda_source ||
                say "$path:$n includes a CUDA header; CUDA stays in .cu and .cuh files (DESIGN.md §4)"
            continue
            ;;
        esac
        [[ $line =~ $include_re ]] || continue
        inc=${BASH_REMATCH[1]}
        case "$inc" in
        *.cuh) $cuda_source || say "$path:$n includes $inc, a CUDA header; only .cu and .cuh files may" ;;
        esac
        if [ "$layer" = tools ]; then
            case "$inc" in
            kinreg/* | tools/*) ;;
            */*) say "$path:$n includes $inc; the program uses only the public API (include/kinreg/*.h)" ;;
            esac
        fi
        header_layer "$inc"
        if [ "$target" = "?" ]; then
            say "$path:$n includes $inc, a public header with no layer: add it to public_layer in scripts/check_layers.sh"
            continue
        elif [ -n "$target" ] && [ -z "${may_use[$target]+x}" ]; then
            say "$path:$n includes $inc from $target/, which is no layer"
            continue
        elif [ -n "$target" ] && ! allowed "$layer" "$target"; then
            say "$path:$n includes $inc (layer $target); $layer/ may use: ${may_use[$layer]:-nothing of the project}"
            continue
        fi
        # Rooms: only project headers named by their path.
        case "$inc" in kinreg/*) continue ;; */*) ;; *) continue ;; esac
        inc_room=${inc%/*}
        [ "$inc_room" = "$room" ] && continue
        case "$inc" in
        *_internal.h) say "$path:$n includes $inc, private to $inc_room/; use that room's own header" ;;
        esac
        case "$room/" in
        "$inc_room"/*) say "$path:$n includes $inc from $inc_room/, the room that holds $room/; a room does not call its composer" ;;
        esac
        [ "$layer" = tools ] || room_edge_list+="$room $inc_room"$'\n'
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$path" || true)
}

room_edge_list=""
for d in $layer_folders; do
    [ -d "$d" ] || continue
    while IFS= read -r f; do
        check_file "$f" "$d"
    done < <(find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
done
for f in include/kinreg/*.h; do
    [ -e "$f" ] || continue
    h=${f#include/kinreg/}
    if [ -z "${public_layer[$h]+x}" ]; then
        say "$f is a public header with no layer: add it to public_layer in scripts/check_layers.sh"
        continue
    fi
    check_file "$f" "${public_layer[$h]}"
done
# tsort names the rooms of a cycle on stderr and fails.
printf '%s' "$room_edge_list" >"$room_edges"
if ! sort -u "$room_edges" | tsort >/dev/null 2>"$room_edges.loop"; then
    loop=$(grep -v 'input contains a loop' "$room_edges.loop" | sed 's/^tsort: //' | tr '\n' ' ')
    say "rooms include each other in a circle: $loop"
fi
rm -f "$room_edges.loop"

# ---- calls ------------------------------------------------------------------
calls=0
# OBJECT_SOURCE<TAB>SYMBOL lines for definitions and for uses in the objects
# under DIR, restricted to objects whose source file still exists.
list_symbols() { # list_symbols DIR defined|undefined
    local flag=--defined-only
    [ "$2" = undefined ] && flag=--undefined-only
    (cd "$1" && find . -name '*.o' -print0 | xargs -0 -r nm -A "$flag" 2>/dev/null) |
        awk -v root="$root" -v kind="$2" '
            {
                split($0, part, ":"); obj = part[1]; sub(/^\.\//, "", obj)
                src = obj; sub(/\.o$/, "", src)
                if (!(src in seen)) { seen[src] = (system("test -f \"" root "/" src "\"") == 0) }
                if (!seen[src]) next
                n = split($0, f, " "); sym = f[n]; type = f[n - 1]
                if (kind == "defined" && type !~ /^[TDBRVW]$/) next
                print src "\t" sym
            }'
}
if [ -n "$objects" ]; then
    defs=$(mktemp)
    edges=$(mktemp)
    trap 'rm -f "$room_edges" "$defs" "$edges"' EXIT
    list_symbols "$objects" defined | sort -t$'\t' -k2,2 -u >"$defs"
    list_symbols "$objects" undefined |
        awk -F'\t' 'NR == FNR { owner[$2] = $1; next }
                    ($2 in owner) && owner[$2] != $1 { print $1 "\t" owner[$2] "\t" $2 }' "$defs" - |
        sort -u >"$edges"
    while IFS=$'\t' read -r from to sym; do
        calls=$((calls + 1))
        fl=${from%%/*} tl=${to%%/*}
        allowed "$fl" "$tl" || say "$from calls $sym in $to (layer $tl); $fl/ may use: ${may_use[$fl]:-nothing of the project}"
    done <"$edges"
    if ! cut -f1,2 "$edges" | sort -u | tr '\t' ' ' | tsort >/dev/null 2>"$defs.loop"; then
        loop=$(grep -v 'input contains a loop' "$defs.loop" | sed 's/^tsort: //' | tr '\n' ' ')
        say "files call each other in a circle: $loop"
    fi
    rm -f "$defs.loop"
    if [ -n "$program" ]; then
        exported=$(mktemp)
        trap 'rm -f "$room_edges" "$defs" "$edges" "$exported"' EXIT
        nm -D --defined-only "$library" | awk '{ print $NF }' | sort -u >"$exported"
        while IFS=$'\t' read -r from sym owner; do
            calls=$((calls + 1))
            grep -qxF "$sym" "$exported" ||
                say "$from calls $sym ($owner), which the library does not export; the program uses only the public API"
        done < <(list_symbols "$program" undefined |
            awk -F'\t' 'NR == FNR { owner[$2] = $1; next } ($2 in owner) { print $1 "\t" $2 "\t" owner[$2] }' "$defs" - |
            sort -u)
    fi
fi

if [ "$violations" -gt 0 ]; then
    echo "check_layers: $violations violation(s) — see docs/DESIGN.md §3 for what each layer and room may use"
    exit 1
fi
summary="$files files, $include_lines include lines"
[ -n "$objects" ] && summary="$summary, $calls calls between files"
echo "check_layers: OK ($summary)"
