package loadgen

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes results as a table for people.
func WriteTable(w io.Writer, rs []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tvariant\tworkload\tMB/s\tentries/s\tp50\tp99\tp99.9\tmax\tCPU s\tpeak RSS\terrors\t")
	for _, r := range rs {
		l := r.Latency
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.0f\t%s\t%s\t%s\t%s\t%.2f\t%s\t%d\t\n",
			r.System, r.Variant, r.Workload, r.MBPerSec, r.EntriesPerSec,
			Micros(l.P50), Micros(l.P99), Micros(l.P999), Micros(l.Max),
			r.CPUSeconds, MiB(r.PeakRSSBytes), r.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s %s %s: first error: %s\n", r.System, r.Variant, r.Workload, r.FirstError)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "%s %s %s: %s\n", r.System, r.Variant, r.Workload, n)
		}
	}
	return nil
}

// Micros formats a latency in microseconds for people: "87µs", "1.25ms",
// "3.1s"; "-" for none.
func Micros(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", us/1e3)
	case us < 1e6:
		return fmt.Sprintf("%.1fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}

// MiB formats a byte count in MiB.
func MiB(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}
