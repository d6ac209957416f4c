#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# plot_sweeps.sh CSV PNG [RANKS_PNG] — from a run_sweeps.sh CSV:
#   PNG        time per step against S, one line per (backend, world, shape,
#              full or ragged step);
#              only the S sweeps are drawn: series with at least two S
#              values (or every series when none has two, as in a smoke run);
#   RANKS_PNG  the MPI rows (worlds shared and rma, one process per rank):
#              time per step against R, one line per (world, E/R, K, S, B,
#              tp, imbalance); left out when the CSV has no MPI rows.
# Needs gnuplot.
set -eu
csv=$1
png=$2
ranks_png=${3:-}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT

# Split the rows into one data file per series, keyed by everything but S.
# Only the machine column may be quoted (and hold commas): cut it off first,
# since POSIX awk has no CSV field parsing.
awk -v dir="$data" '
  NR == 1 { next }
  {
    line = $0
    if (substr(line, 1, 1) == "\"") line = "M" substr(line, index(substr(line, 2), "\",") + 2)
    split(line, f, ",")
    label = f[2] " (" f[3] ") R=" f[6] " E=" f[7] " K=" f[8] " B=" f[10] " tp=" f[11] " imb=" f[12]
    # A ragged step (its own curve, mean S/2 tokens) is drawn at its S.
    if (f[15] == "ragged") label = label " ragged"
    if (!(label in file)) { file[label] = dir "/series" (++n) ".dat"; print label > (dir "/series" n ".label") }
    print f[9], f[13] >> file[label]
    count[label]++
  }
  END { for (l in count) if (count[l] >= 2) many = 1; print (many ? 2 : 1) > (dir "/min_points") }
' "$csv"

# The MPI rows, keyed by everything but R: time against the rank count.
awk -v dir="$data" '
  NR == 1 { next }
  {
    line = $0
    if (substr(line, 1, 1) == "\"") line = "M" substr(line, index(substr(line, 2), "\",") + 2)
    split(line, f, ",")
    if (f[3] != "shared" && f[3] != "rma") next
    # mpi_bench scales E with the processes: E/R experts per rank is the shape.
    label = f[3] " world, E/R=" (f[7] / f[6]) " K=" f[8] " S=" f[9] " B=" f[10] " tp=" f[11] " imb=" f[12]
    if (!(label in file)) { file[label] = dir "/ranks" (++n) ".dat"; print label > (dir "/ranks" n ".label") }
    print f[6], f[13] >> file[label]
  }
' "$csv"

min=$(cat "$data/min_points")
plots=""
for f in "$data"/series*.dat; do
  [ -e "$f" ] || continue
  [ "$(wc -l < "$f")" -ge "$min" ] || continue
  sort -n -o "$f" "$f"
  label=$(cat "${f%.dat}.label")
  plots="${plots:+$plots, }'$f' using 1:2 with linespoints title '$label' noenhanced"
done
machine=$(sed -n '2p' "$csv" | sed 's/^"\([^"]*\)".*/\1/; s/^\([^"][^,]*\),.*/\1/' | cut -c1-80)
term=png
gnuplot -e "set terminal" 2>&1 | grep -q pngcairo && term=pngcairo
gnuplot <<GNUPLOT
set terminal $term size 1000,620
set output '$png'
set title "MoonEP: time per planning step vs tokens per rank S\n$machine" noenhanced
set xlabel 'S (tokens per rank)'
set ylabel 'time per step (us)'
set logscale xy
set grid
set key left top
plot $plots
GNUPLOT

[ -n "$ranks_png" ] || exit 0
plots=""
for f in "$data"/ranks*.dat; do
  [ -e "$f" ] || continue
  sort -n -o "$f" "$f"
  label=$(cat "${f%.dat}.label")
  plots="${plots:+$plots, }'$f' using 1:2 with linespoints title '$label' noenhanced"
done
[ -n "$plots" ] || exit 0
gnuplot <<GNUPLOT
set terminal $term size 1000,620
set output '$ranks_png'
set title "MoonEP over MPI: time per planning step vs ranks R (one process per rank, slowest rank)\n$machine" noenhanced
set xlabel 'R (MPI processes)'
set ylabel 'time per step (us)'
set logscale y
set xtics 1
set grid
set key left top
plot $plots
GNUPLOT
