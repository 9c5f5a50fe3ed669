package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPositionParseAndString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Position
		wantErr bool
	}{
		{in: "49590338271490256608559692538361571095921575989136588898", want: Position{Sequence: "49590338271490256608559692538361571095921575989136588898"}},
		{in: "123/4", want: Position{Sequence: "123", SubSequence: 4, HasSub: true}},
		{in: "SHARD_END", want: Position{ShardEnd: true}},
		{in: "", wantErr: true},
		{in: "12a", wantErr: true},
		{in: "12/", wantErr: true},
		{in: "12/-1", wantErr: true},
		{in: "/3", wantErr: true},
		{in: "LATEST", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := ParsePosition(tc.in)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, p)
			assert.Equal(t, tc.in, p.String())
		})
	}
}

func TestPositionCompare(t *testing.T) {
	// Each is strictly after the previous one.
	ordered := []string{
		"0",
		"9",
		"10",
		"18446744073709551615", // max uint64
		"18446744073709551616", // past it: big-integer comparison
		"49590338271490256608559692538361571095921575989136588898/0",
		"49590338271490256608559692538361571095921575989136588898/7",
		"49590338271490256608559692538361571095921575989136588898",
		"49590338271490256608559692538361571095921575989136588899",
		"SHARD_END",
	}
	for i := range ordered {
		for j := range ordered {
			a, err := ParsePosition(ordered[i])
			require.NoError(t, err)
			b, err := ParsePosition(ordered[j])
			require.NoError(t, err)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			assert.Equal(t, want, a.Compare(b), "%s vs %s", ordered[i], ordered[j])
		}
	}
	a, _ := ParsePosition("007")
	b, _ := ParsePosition("7")
	assert.Equal(t, 0, a.Compare(b), "leading zeros do not change the number")
}
