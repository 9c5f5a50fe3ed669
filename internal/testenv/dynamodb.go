package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// KindDynalite names the DynamoDB emulator (npm dynalite, in memory).
const KindDynalite = "dynalite"

// DynamoDB is a running DynamoDB emulator. Tests use it to hold the
// checkpoint tables of other Kinesis consumers (Redpanda Connect's
// aws_kinesis input, the KCL) that `checkpoints import` reads.
type DynamoDB struct {
	Endpoint string
	Port     int
	proc     *Process
}

// Process is the running emulator process.
func (d *DynamoDB) Process() *Process { return d.proc }

// Close stops the emulator.
func (d *DynamoDB) Close() {
	if d.proc != nil {
		d.proc.Stop(5 * time.Second)
	}
}

// StartDynalite starts dynalite, in memory, bound to 127.0.0.1 on a free
// port, with table creation and deletion taking no time.
func StartDynalite(ctx context.Context) (*DynamoDB, error) {
	return retryStart(func() (*DynamoDB, error) { return startDynalite(ctx) })
}

func startDynalite(ctx context.Context) (*DynamoDB, error) {
	node, nm, err := nodePackage("dynalite", "package.json", "dynalite")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	script := fmt.Sprintf(`require('dynalite')({createTableMs:0,deleteTableMs:0,updateTableMs:0}).listen(%d,'127.0.0.1',function(err){if(err){console.error(err);process.exit(1)}})`, port)
	p, err := startProcess(KindDynalite, []string{"NODE_PATH=" + nm}, nm, node, "-e", script)
	if err != nil {
		return nil, err
	}
	d := &DynamoDB{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, proc: p}
	return d, waitReady(ctx, p, 30*time.Second, func(ctx context.Context) error {
		_, err := d.Client().ListTables(ctx, &dynamodb.ListTablesInput{})
		return err
	})
}

// NewDynalite starts dynalite for a test and stops it at the end.
func NewDynalite(tb testing.TB) *DynamoDB {
	tb.Helper()
	d, err := StartDynalite(tb.Context())
	Require(tb, "starting "+KindDynalite, err)
	tb.Cleanup(d.Close)
	return d
}

// Client returns a DynamoDB client for the emulator with the static test
// credentials.
func (d *DynamoDB) Client() *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(d.Endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}
