package testenv

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIntegrationEmulators(t *testing.T) {
	for _, kind := range []string{KindKinesisMock, KindKinesalite} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := NewEmulator(t, kind)
			k.MustCreateStream(t, "testenv", 2)
			c := k.Client()
			_, err := c.PutRecord(t.Context(), &kinesis.PutRecordInput{
				StreamName: aws.String("testenv"), PartitionKey: aws.String("k"), Data: []byte("hello"),
			})
			require.NoError(t, err)
			shards, err := c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String("testenv")})
			require.NoError(t, err)
			assert.Len(t, shards.Shards, 2)

			pid := k.Process().PID()
			if kind == KindKinesisMock {
				cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				require.NoError(t, err)
				assert.Contains(t, string(cmdline), "--max-old-space-size=12288", "a soak's hour of records fits the emulator's heap")
			}
			k.Close()
			assert.True(t, k.Process().Exited(), "emulator pid %d still running after Close", pid)
		})
	}
}

func TestIntegrationRedisRestartKeepsData(t *testing.T) {
	r := NewRedis(t, RedisOptions{AppendOnly: true, Password: "s3cret"})
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.Set(t.Context(), "k", "v", 0).Err())
	require.NoError(t, r.Restart(t.Context()))
	got, err := c.Get(t.Context(), "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)
}

func TestIntegrationRedisTLSAndACL(t *testing.T) {
	r := NewRedis(t, RedisOptions{TLS: true, ACLUser: "app", ACLPassword: "pw"})
	assert.Contains(t, r.URL(), "rediss://app:pw@")
	c := r.Client()
	defer c.Close()
	require.NoError(t, c.Ping(t.Context()).Err())
}

func TestIntegrationRedisCluster(t *testing.T) {
	cl := NewRedisCluster(t)
	c := cl.Client()
	defer c.Close()
	for i := 0; i < 20; i++ {
		require.NoError(t, c.Set(t.Context(), fmt.Sprintf("key-%d", i), i, 0).Err())
	}
	n := 0
	for _, node := range cl.Nodes {
		nc := node.Client()
		keys, err := nc.DBSize(t.Context()).Result()
		nc.Close()
		require.NoError(t, err)
		n += int(keys)
	}
	assert.Equal(t, 20, n, "keys spread over the three masters")
}

func TestIntegrationDynalite(t *testing.T) {
	d := NewDynalite(t)
	c := d.Client()
	_, err := c.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String("testenv"),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
	})
	require.NoError(t, err)
	// dynalite creates tables asynchronously even with createTableMs 0.
	require.NoError(t, dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second }).Wait(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("testenv")}, 30*time.Second))
	_, err = c.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String("testenv"),
		Item:      map[string]ddbtypes.AttributeValue{"k": &ddbtypes.AttributeValueMemberS{Value: "v"}},
	})
	require.NoError(t, err)
	out, err := c.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String("testenv")})
	require.NoError(t, err)
	assert.Len(t, out.Items, 1)

	d.Close()
	assert.True(t, d.Process().Exited(), "dynalite still running after Close")
}
