package checkpointer

import "github.com/connect-kinesis/connect-kinesis/internal/lintrule"

// LintChecks are the cross-field rules of Fields for a plugin's lint rule; the
// same rules are enforced by Config.Validate. The rules of one field are that
// field's own (see the lint* rules below), so lint points at its line.
func LintChecks() []lintrule.Check {
	return []lintrule.Check{
		{
			When:    `this.checkpoint.redis.kind.or("` + KindSimple + `") == "` + KindFailover + `" && this.checkpoint.redis.master.or("") == "" && !this.checkpoint.redis.url.or("").contains("master_name=")`,
			Message: `"field ` + fieldPathRedisMaster + `: required with ` + fieldPathRedisKind + `: failover (the Sentinel master name)"`,
		},
	}
}

// lintRedisURL is the URL field's rule. `create` writes it empty, for the
// user to fill. The URL is never quoted: it may hold a password.
var lintRedisURL = lintrule.Field(
	lintrule.Check{
		When:    `this.type() == "string" && this == ""`,
		Message: `"field ` + fieldPathRedisURL + `: required: the URL of the Redis that keeps this group's checkpoints, e.g. redis://localhost:6379 or rediss://user:${REDIS_PASSWORD}@redis.internal:6380/0"`,
	},
	lintrule.Check{
		When:    `this.type() == "string" && this != "" && !this.re_match("^rediss?://")`,
		Message: `"field ` + fieldPathRedisURL + `: use a redis:// or rediss:// URL, e.g. redis://localhost:6379"`,
	},
)

// lintGroup is the group field's rule. `create` writes it empty: a group
// name copied from an example would make two unrelated pipelines one group,
// each reading half the other's shards.
var lintGroup = lintrule.Field(lintrule.Check{
	When:    `this.type() == "string" && this == ""`,
	Message: `"field ` + fieldPathGroup + `: required: a name for this consuming application, used by its instances only (another application with the same group would take half its shards), e.g. billing-orders"`,
})

// lintInstanceID is the lease.instance_id field's rule.
var lintInstanceID = lintrule.Field(lintrule.Check{
	When:    `this.type() == "string" && this.re_match("[|\\s]")`,
	Message: `"field ` + fieldPathInstanceID + `: %q must not contain spaces or '|', e.g. the pod name".format(this)`,
})
