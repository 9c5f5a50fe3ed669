package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnhancedFanOutValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		e       EnhancedFanOut
		streams []string
		want    string
	}{
		{"off", EnhancedFanOut{}, []string{"a"}, ""},
		{"name", EnhancedFanOut{Enabled: true, ConsumerName: "app.1_x-y"}, []string{"a", "b"}, ""},
		{"nothing", EnhancedFanOut{Enabled: true}, []string{"a"}, "field enhanced_fan_out.consumer_name"},
		{"arn with two streams", EnhancedFanOut{Enabled: true, ConsumerARN: "arn:aws:kinesis:r:1:stream/a/consumer/c:1"}, []string{"a", "b"}, "field enhanced_fan_out.consumer_arn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.e.validate(tc.streams)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
