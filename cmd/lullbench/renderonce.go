package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// renderOnce: two flush waves of daily digests, one where every digest
// differs (1–10 items of each type at random, as in the flush wave) and
// one where every recipient got the same fan-out (5 items of each type),
// whose emails the flush renders once per set and fills in per
// recipient. Wall time on a shared machine varies with the neighbours;
// lull's CPU time per digest is the steadier figure, and the ratio of
// the two waves is what render-once buys.
func (b *bench) renderOnce(ctx context.Context) error {
	n := 20_000
	if b.quick {
		n = 4_000
	}
	for _, t := range waveTypes {
		if err := b.putType(t, `{"default_mode":"daily","display_limit":10}`); err != nil {
			return err
		}
	}
	if err := b.openDigests(ctx, "d", n); err != nil {
		return err
	}
	if err := b.openDigestsOf(ctx, "v", n, func() int { return 5 }); err != nil {
		return err
	}
	type wave struct {
		r   waveResult
		cpu float64 // lull's CPU seconds
	}
	measure := func(prefix string) (wave, error) {
		before, _ := b.cpuSeconds()
		r, err := b.dueAt(ctx, prefix, 0)
		after, _ := b.cpuSeconds()
		return wave{r, after - before}, err
	}
	differ, err := measure("d")
	if err != nil {
		return err
	}
	same, err := measure("v")
	if err != nil {
		return err
	}
	perDigest := func(w wave) string {
		return fmt.Sprintf("%.0f µs CPU, %s wall (%.0f digests/s)", w.cpu/float64(n)*1e6, w.r.span.Round(time.Millisecond), float64(n)/w.r.span.Seconds())
	}
	b.report.add(fmt.Sprintf("Render once: %s daily digests due at once, all different vs all the same", strconv.Itoa(n)), []row{
		{"every digest differs: lull CPU per digest, wave", perDigest(differ)},
		{"every recipient got the same fan-out: lull CPU per digest, wave", perDigest(same)},
		{"CPU ratio (differ / same)", fmt.Sprintf("%.2f", differ.cpu/same.cpu)},
		{"wall ratio (differ / same)", fmt.Sprintf("%.2f", differ.r.span.Seconds()/same.r.span.Seconds())},
	})
	return nil
}
