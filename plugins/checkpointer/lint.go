package checkpointer

import "github.com/connect-kinesis/connect-kinesis/internal/lintrule"

// LintChecks are the cross-field rules of Fields for a plugin's lint rule; the
// same rules are enforced by Config.Validate. The URL is never quoted: it
// may hold a password.
func LintChecks() []lintrule.Check {
	return []lintrule.Check{
		{
			When:    `this.checkpoint.redis.url.type() == "string" && !this.checkpoint.redis.url.re_match("^rediss?://")`,
			Message: `"field ` + fieldPathRedisURL + `: use a redis:// or rediss:// URL, e.g. redis://localhost:6379"`,
		},
		{
			When:    `this.checkpoint.redis.kind.or("` + KindSimple + `") == "` + KindFailover + `" && this.checkpoint.redis.master.or("") == "" && !this.checkpoint.redis.url.or("").contains("master_name=")`,
			Message: `"field ` + fieldPathRedisMaster + `: required with ` + fieldPathRedisKind + `: failover (the Sentinel master name)"`,
		},
		{
			When:    `this.lease.instance_id.or("").re_match("[|\\s]")`,
			Message: `"field ` + fieldPathInstanceID + `: %q must not contain spaces or '|', e.g. the pod name".format(this.lease.instance_id)`,
		},
	}
}
