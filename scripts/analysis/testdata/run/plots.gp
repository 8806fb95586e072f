set terminal pngcairo noenhanced size 900,600 font "sans,10"
set datafile separator ","
set key top left
set grid
set logscale y
set ylabel "time per read (ms, median; TCG guest, emulated)"
set output "new4/cost-vs-vmas.png"
set logscale x
set title "Cost of one read against VMAs (16 MiB resident)"
set xlabel "VMAs in the target"
plot "< awk -F, '$3 ~ /^spread$/ && $2 == 16' new4/cost.csv" using 4:6 with linespoints title "1. smaps + C parser (series)", "" using 4:8 with linespoints title "2. awk over smaps (series)", "" using 4:10 with linespoints title "3. smaps_rollup (series)", "" using 4:12 with linespoints dt 2 title "4. smaps_rollup (stock)", "" using 4:14 with linespoints title "5. status VmRSS (series)"
set output "new4/cost-vs-rss.png"
set title "Cost of one read against resident memory (4,000 VMAs)"
set xlabel "resident memory (MiB)"
plot "< awk -F, '$3 ~ /^spread$/ && $1 == 4000' new4/cost.csv" using 5:6 with linespoints title "1. smaps + C parser (series)", "" using 5:8 with linespoints title "2. awk over smaps (series)", "" using 5:10 with linespoints title "3. smaps_rollup (series)", "" using 5:12 with linespoints dt 2 title "4. smaps_rollup (stock)", "" using 5:14 with linespoints title "5. status VmRSS (series)"
set output "new4/stall-16000-128h.png"
unset logscale x
set datafile separator whitespace
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set title "Target (vCPU 0) mmap + touch 64 KiB + munmap, 16000 VMAs, 128 MiB resident, the anonymous half in one VMA, while N readers (vCPU 1) loop"
set ylabel "latency per operation (us, log; TCG guest, emulated)"
set xlabel "readers"
plot "/work/wb/scripts/analysis/testdata/run/stall-16000-128h.dat" using 2:xtic(1) title "stock p50" lc rgb "#9ecae1", "" using 3 title "series p50" lc rgb "#fdae6b", "" using 4 title "stock p99" lc rgb "#3182bd", "" using 5 title "series p99" lc rgb "#e6550d", "" using 6 title "stock max" lc rgb "#08519c", "" using 7 title "series max" lc rgb "#a63603"
set datafile separator ","
