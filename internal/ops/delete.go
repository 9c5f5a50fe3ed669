package ops

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

func runDelete(c *cli.Context) error {
	if !c.Bool(flagYes) {
		return fmt.Errorf("flag --%s: delete removes every checkpoint of the group; pass --%s to confirm", flagYes, flagYes)
	}
	o, err := openFromFlags(c)
	if err != nil {
		return err
	}
	defer o.cp.Close()
	res, err := o.store.Delete(c.Context, c.Bool(flagForce))
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "deleted group %s on %s: %d checkpoints, %d closed shards\n", o.cp.Config().Group, o.stream.ID, len(res.Checkpoints), len(res.Closed))
	for _, s := range slices.Sorted(maps.Keys(res.Checkpoints)) {
		fmt.Fprintf(w, "  %s: %s -> (none)\n", s, res.Checkpoints[s])
	}
	if len(res.LiveLeases) > 0 {
		fmt.Fprintf(w, "  leases removed while live (forced): %s\n", strings.Join(res.LiveLeases, ", "))
	}
	// The pipelines' lease.period is not stored in Redis: the command can
	// only judge by the period it is given, and says so.
	fmt.Fprintf(w, "instances were judged running by a heartbeat within --%s %v; one whose pipelines' lease.period is longer may have been taken as stopped and writes its state back\n",
		flagLeasePeriod, c.Duration(flagLeasePeriod))
	return nil
}
