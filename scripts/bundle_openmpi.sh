#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# bundle_openmpi.sh DEST — Debian's Open MPI 4.1 runtime (mpirun, orted,
# its libraries, plugins and help files, PMIx, and every library they load)
# copied under DEST, relocated with OPAL_PREFIX, for a machine without MPI
# (the GPU machine). DEST/mpi_env.sh sets the environment. An experiment:
# Open MPI is not built to be moved, and components whose libraries are
# missing there are skipped (the environment asks for shared memory and
# TCP only).
set -euo pipefail
DEST=${1:?usage: bundle_openmpi.sh DEST}
ARCH=x86_64-linux-gnu
SRC_LIB=/usr/lib/$ARCH/openmpi/lib
[ -x /usr/bin/orterun ] || { echo "bundle_openmpi.sh: no Debian Open MPI here (/usr/bin/orterun)" >&2; exit 1; }
rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib/$ARCH/openmpi" "$DEST/share" "$DEST/deps" "$DEST/lib/$ARCH/pmix2/lib"
cp /usr/bin/orterun "$DEST/bin/mpirun"
cp /usr/bin/orted "$DEST/bin/orted"
cp -a "$SRC_LIB" "$DEST/lib/$ARCH/openmpi/"
cp -a /usr/share/openmpi "$DEST/share/"
cp -a /usr/lib/$ARCH/pmix2/lib/pmix "$DEST/lib/$ARCH/pmix2/lib/"
cp -a /usr/lib/$ARCH/pmix2/share "$DEST/lib/$ARCH/pmix2/" 2>/dev/null || true
mkdir -p "$DEST/etc"
cp /etc/openmpi/openmpi-mca-params.conf "$DEST/etc/" 2>/dev/null || true
# Every library the programs and plugins load, except glibc's and the driver.
skip='^(libc|libm|libpthread|libdl|librt|ld-linux[^ ]*|libcuda|linux-vdso)\.so'
find "$DEST/bin" "$DEST/lib" -type f \( -name '*.so*' -o -perm -u+x \) | while read -r f; do
  ldd "$f" 2>/dev/null | awk '/=> \// {print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [ -e "$DEST/deps/$name" ] || cp -L "$path" "$DEST/deps/$name"
  done
done
cat > "$DEST/mpi_env.sh" <<'ENV'
# source mpi_env.sh: the bundled Open MPI, relocated.
MPI_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$MPI_HOME
export PATH=$MPI_HOME/bin:$PATH
export LD_LIBRARY_PATH=$MPI_HOME/lib/x86_64-linux-gnu/openmpi/lib:$MPI_HOME/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PMIX_MCA_mca_base_component_path=$MPI_HOME/lib/x86_64-linux-gnu/pmix2/lib/pmix
export OMPI_MCA_mca_base_param_files=$MPI_HOME/etc/openmpi-mca-params.conf
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
# PMIx's zlib compression component does not load relocated (it is only a
# speed-up of its own messages): no warnings about it.
export PMIX_MCA_pcompress_base_silence_warning=1 PMIX_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ENV
du -sh "$DEST"
