package checkpointer

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// redisLogOnce guards the go-redis logger, which is one per process.
var redisLogOnce sync.Once

// routeRedisLogs sends go-redis' own log lines (connection pool dial
// failures, printed to stderr by default, once per attempt) to log at debug
// level. The failure that matters reaches the user once, as the error of the
// call, naming the field; the pool's lines repeat it in another format. The
// go-redis logger is process-wide: the first checkpointer's logger gets the
// lines of every go-redis client in the binary.
func routeRedisLogs(log *service.Logger) {
	redisLogOnce.Do(func() {
		redis.SetLogger(redisLogger{log: log})
	})
}

type redisLogger struct{ log *service.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if l.log == nil {
		return
	}
	l.log.With("component", "go-redis").Debug(fmt.Sprintf(format, v...))
}
