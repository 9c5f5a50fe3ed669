package input

import (
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// connectError tells Benthos how long to wait before the next Connect.
// Benthos retries about once a second; an error kinesisx.Permanent calls
// permanent (credentials, a stream that does not exist, a Redis that refuses
// the password or a permission, no region) waits kinesisx.ConnectWait
// instead, growing to a bound, and says it will keep retrying.
func (k *kinesisInput) connectError(err error) error {
	if !kinesisx.Permanent(err) {
		k.permanentFailures = 0
		return err
	}
	k.permanentFailures++
	wait := kinesisx.ConnectWait(k.permanentFailures)
	return service.NewErrBackOff(fmt.Errorf("%w (this needs a fix of the configuration, credentials or permissions: retrying in %v, at most every %v, until it works)", err, wait, kinesisx.ConnectMaxWait), wait)
}
