package streams

import (
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.CloseShared()
	os.Exit(code)
}

// TestIntegrationListerFindsStreamsByPatternAndTag runs the Lister against
// both emulators, which answer ListStreams with names only and page by
// HasMoreStreams: streams are found by pattern and tag, a deleted one
// leaves the listing, and one created again under its name is a new
// incarnation (another creation time, the same key; kinesis-mock only).
func TestIntegrationListerFindsStreamsByPatternAndTag(t *testing.T) {
	for _, kind := range []string{testenv.KindKinesisMock, testenv.KindKinesalite} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := testenv.SharedEmulator(t, kind)
			ctx := t.Context()
			c := k.Client()
			base := testenv.StreamName(t)
			for _, s := range []string{"-a", "-b", "-c"} {
				k.MustCreateStream(t, base+s, 1)
			}
			k.MustCreateStream(t, "other-"+base, 1)
			_, err := c.AddTagsToStream(ctx, &kinesis.AddTagsToStreamInput{StreamName: aws.String(base + "-b"), Tags: map[string]string{"team": "a"}})
			require.NoError(t, err)

			l := NewLister(c, kinesisx.DefaultBackoff)
			byPattern, err := ParseRules([]string{base + "-?"}, nil)
			require.NoError(t, err)
			byTag, err := ParseRules([]string{base + "-*"}, map[string]string{"team": "a"})
			require.NoError(t, err)

			got, err := l.List(ctx, byPattern)
			require.NoError(t, err)
			require.Equal(t, []string{base + "-a", base + "-b", base + "-c"}, names(got))
			for _, id := range got {
				assert.NotEmpty(t, id.ARN)
				assert.True(t, id.Readable(), id.Status)
			}
			first := got[0]

			got, err = l.List(ctx, byTag)
			require.NoError(t, err)
			assert.Equal(t, []string{base + "-b"}, names(got))

			// Deleted: gone from the listing.
			_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(base + "-a")})
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				got, err = l.List(ctx, byPattern)
				return err == nil && len(got) == 2
			}, 30*time.Second, 200*time.Millisecond)
			assert.Equal(t, []string{base + "-b", base + "-c"}, names(got))

			// Created again, a second later than before (kinesis-mock
			// dates a stream to the second): a new incarnation.
			time.Sleep(time.Until(first.Created.Add(1100 * time.Millisecond)))
			k.MustCreateStream(t, base+"-a", 1)
			got, err = l.List(ctx, byPattern)
			require.NoError(t, err)
			require.Equal(t, base+"-a", got[0].Name)
			assert.Equal(t, first.Key(), got[0].Key(), "the same name keeps its key")
			if kind == testenv.KindKinesalite {
				// kinesalite dates the new stream as the deleted one
				// (seen: created 21:46:45 for a stream created again at
				// 21:46:47): it cannot show a re-creation.
				return
			}
			assert.True(t, got[0].Created.After(first.Created), "created %v, first %v", got[0].Created, first.Created)
			assert.NotEqual(t, first.Incarnation(), got[0].Incarnation())
		})
	}
}

func names(ids []Identity) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.Name
	}
	return out
}
