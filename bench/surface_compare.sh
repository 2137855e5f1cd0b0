#!/bin/sh
# The surface beside Open3D's ScalableTSDFVolume (issue 34): the synthetic
# scan's first SECONDS (default 5) written as a TUM sequence with its ground
# truth, fused at the true poses by `kinreg mesh` and by Open3D at the same
# voxel, band and depth limit, each mesh then scored against the scene's own
# distance functions (tests/test_surface.c: score_mesh_file): vertex to
# scene (mean, median, 95th percentile) and how much of what the frames saw
# has a vertex within a voxel. Times: kinreg's fusion alone (its test,
# integrate calls only, depth alone as Open3D's NoColor volume is fed) and
# Open3D's integrate calls; both meshes' extraction.
#
#   bench/surface_compare.sh [SECONDS] [VOXEL]
#
# Needs the build (build/kinreg, build/tests/kinreg_tests; KINREG_BUILD to
# use another) and Open3D for /usr/bin/python3 (Debian: apt-get install
# python3-open3d; the PyPI open3d-cpu 0.20 of bench/setup_venv.sh meshes
# nothing from ScalableTSDFVolume on this machine: an empty volume). Run
# with OMP_NUM_THREADS set to the cores both may use.
set -eu
seconds=${1:-5}
voxel=${2:-0.005}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${KINREG_BUILD:-$root/build}
python=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -c 'import open3d' 2>/dev/null || {
    echo "surface_compare: no Open3D for $python (Debian: apt-get install python3-open3d)" >&2
    exit 1
}
echo "== $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, synthetic:1 first $seconds s, voxel $voxel m"
"$build/kinreg" convert synthetic --duration "$seconds" -f tum "$work/seq" -q
echo "== kinreg: fusion and meshing alone (the library's calls), then the command end to end"
KR_SURFACE_VOXEL=$voxel KR_SURFACE_SECONDS=$seconds KR_SURFACE_NO_COLOUR=1 \
    "$build/tests/kinreg_tests" surface synthetic_scene_meshes_on_what_was_seen | grep -E "frames at|kinreg:"
/usr/bin/time -f "kinreg mesh: %e s wall (reading PNGs, preprocessing, fusing, meshing, writing)" \
    "$build/kinreg" mesh "tum:$work/seq" --groundtruth -b cpu --voxel "$voxel" -q -o "$work/kinreg.ply"
echo "== Open3D ScalableTSDFVolume (sdf_trunc 4 voxels, depth_trunc 3 m)"
"$python" "$root/bench/surface_open3d.py" "$work/seq" "$work/open3d.ply" --voxel "$voxel"
echo "== both meshes scored against the scene"
for m in kinreg open3d; do
    KR_SURFACE_SCORE="$work/$m.ply" KR_SURFACE_SECONDS=$seconds KR_SURFACE_VOXEL=$voxel \
        "$build/tests/kinreg_tests" surface score_mesh_file | grep vertices
done
