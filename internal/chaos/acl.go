package chaos

import (
	"bufio"
	"context"
	"os"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The instances reach Redis as the input's user of the ACL file the
// project ships for operators (config/deploy/redis-acl.conf), so the chaos
// paths (re-seeding a store that forgot, reshards, hand-offs, shutdowns)
// run under exactly the permissions the docs give. aclRefusals finds what
// Redis refused them.

// refusalMark is in every log line the input writes when Redis refuses a
// command or key for lack of permission.
const refusalMark = "lack of permission"

// aclRefusals lists the refusals in the server's ACL LOG (since its last
// restart) and the instances' log lines reporting one (which outlive a
// restart), at most maxProblems.
func (r *runner) aclRefusals(ctx context.Context) ([]string, error) {
	out, err := r.aclLog(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range r.outputFiles() {
		logPath := strings.TrimSuffix(o, ".jsonl") + ".log"
		f, err := os.Open(logPath)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() && len(out) < maxProblems {
			if strings.Contains(sc.Text(), refusalMark) {
				out = append(out, logPath+": "+sc.Text())
			}
		}
		f.Close()
	}
	return out, nil
}

// aclLog reads the ACL LOG of the run's Redis: of every node of a Cluster
// (each logs only what it refused).
func (r *runner) aclLog(ctx context.Context) ([]string, error) {
	cc, ok := r.rc.(*redis.ClusterClient)
	if !ok {
		return testenv.ACLDenials(ctx, r.rc)
	}
	var mu sync.Mutex
	var out []string
	err := cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
		d, err := testenv.ACLDenials(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, d...)
		return err
	})
	return out, err
}
