package reader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A reader publishes the bytes/s it delivered: the first window as it is,
// then a moving average that a burst moves only part of the way.
func TestReaderProgressRate(t *testing.T) {
	var p readerProgress
	start := time.Unix(1000, 0)
	p.startRate(start)
	p.observeDelivery(start, 3000)
	p.observeDelivery(start, 1000)
	assert.Equal(t, int64(2000), p.rate(start.Add(2*time.Second), time.Second))
	p.observeDelivery(start, 8000) // a burst: 8000 B/s over the next second
	burst := p.rate(start.Add(3*time.Second), time.Second)
	assert.Greater(t, burst, int64(2000))
	assert.Less(t, burst, int64(5000), "one burst moves the average part of the way")
	quiet := p.rate(start.Add(4*time.Second), time.Second)
	assert.Less(t, quiet, burst, "nothing delivered since")
	assert.Positive(t, quiet)
}
