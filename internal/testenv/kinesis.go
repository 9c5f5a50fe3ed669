package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
)

// Emulator names.
const (
	KindKinesisMock = "kinesis-mock"
	KindKinesalite  = "kinesalite"
)

// Region and static credentials the emulators accept.
const (
	Region    = "us-east-1"
	AccessKey = "AKIDTESTONLY"
	SecretKey = "test-secret-not-real"
)

// SubscriptionHeldAtMost bounds how long a shard can refuse a subscription
// after its previous subscriber's connection died (SIGKILL, a cut): Kinesis
// drops such a subscription once it notices the connection gone, and at the
// latest when its five-minute session ends. kinesis-mock frees the shard at
// once when the connection is closed normally, but keeps the subscription of
// a connection that was reset (TCP RST, as a SIGKILLed process with unread
// data sends) for the whole session: measured 4 min 59 s. A test that waits
// for a shard to be read again after such a death waits this long plus its
// own margin; it polls, so it is only this slow when the emulator is.
const SubscriptionHeldAtMost = 5 * time.Minute

// Kinesis is a running emulator.
type Kinesis struct {
	Kind     string
	Endpoint string
	Port     int
	// TLSEndpoint is kinesis-mock's HTTPS port, which speaks HTTP/2 and so
	// serves SubscribeToShard (enhanced fan-out). Its certificate, for
	// 127.0.0.1, is signed by the test CA in CAFile (see EmulatorCA): set
	// AWS_CA_BUNDLE=CAFile for the AWS SDK to trust it.
	// Empty for kinesalite.
	TLSEndpoint string
	CAFile      string
	proc        *Process
}

// Process is the running emulator process.
func (k *Kinesis) Process() *Process { return k.proc }

// Close stops the emulator.
func (k *Kinesis) Close() {
	if k.proc != nil {
		k.proc.Stop(5 * time.Second)
	}
}

// StartKinesisMock starts kinesis-mock (npm kinesis-local) with every
// simulated delay at 0ms, on two free ports: Endpoint (plain HTTP/1.1) and
// TLSEndpoint (HTTP/2 over TLS, with a certificate of a fresh test CA).
func StartKinesisMock(ctx context.Context) (*Kinesis, error) {
	return retryStart(func() (*Kinesis, error) { return startKinesisMock(ctx) })
}

// kinesisMockHeapMiB is the heap kinesis-mock's Node may grow to.
const kinesisMockHeapMiB = 12 << 10

func startKinesisMock(ctx context.Context) (*Kinesis, error) {
	node, nm, err := nodePackage("kinesis-local", "main.js", "kinesis-local (kinesis-mock)")
	if err != nil {
		return nil, err
	}
	pkg := filepath.Join(nm, "kinesis-local")
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	tlsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	ca, err := EmulatorCA()
	if err != nil {
		return nil, err
	}
	env := []string{
		"KINESIS_MOCK_CERT_PATH=" + ca.kinesisMockCert,
		"KINESIS_MOCK_PLAIN_PORT=" + itoa(port),
		"KINESIS_MOCK_TLS_PORT=" + itoa(tlsPort),
		"LOG_LEVEL=WARN",
		"SHARD_LIMIT=1000",
		"AWS_REGION=" + Region,
	}
	for _, d := range []string{"CREATE_STREAM", "DELETE_STREAM", "MERGE_SHARDS", "SPLIT_SHARD",
		"UPDATE_SHARD_COUNT", "REGISTER_STREAM_CONSUMER", "DEREGISTER_STREAM_CONSUMER",
		"START_STREAM_ENCRYPTION", "STOP_STREAM_ENCRYPTION", "UPDATE_STREAM_MODE"} {
		env = append(env, d+"_DURATION=0ms")
	}
	// kinesis-mock keeps every record of every stream in memory for its
	// retention period; a soak's hour writes 675 MiB of soak-big's 96 KiB
	// records alone, held as text. Node's default heap limit (4 GiB on a
	// 24 GiB machine) must not be what ends a long run: near it the
	// collector takes the CPU and the emulator stops answering.
	p, err := startProcess(KindKinesisMock, env, pkg, node, "--max-old-space-size="+itoa(kinesisMockHeapMiB), "main.js")
	if err != nil {
		return nil, err
	}
	k := &Kinesis{
		Kind: KindKinesisMock, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port,
		TLSEndpoint: fmt.Sprintf("https://127.0.0.1:%d", tlsPort), CAFile: ca.CA, proc: p,
	}
	return k, waitReady(ctx, p, 60*time.Second, func(ctx context.Context) error {
		return httpOK(ctx, k.Endpoint+"/healthcheck")
	})
}

// TLSConfig trusts the emulator's test CA.
func (k *Kinesis) TLSConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(k.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading the emulator's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("reading the emulator's CA %s: no certificate in it", k.CAFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// KinesaliteOptions tunes a kinesalite started by StartKinesaliteWith.
type KinesaliteOptions struct {
	// ShardLimit is the most shards the emulator's account may hold in all
	// its streams; 0 means 1,000.
	ShardLimit int
}

// StartKinesalite starts kinesalite bound to 127.0.0.1 on a free port.
func StartKinesalite(ctx context.Context) (*Kinesis, error) {
	return StartKinesaliteWith(ctx, KinesaliteOptions{})
}

// StartKinesaliteWith starts kinesalite with opts.
func StartKinesaliteWith(ctx context.Context, opts KinesaliteOptions) (*Kinesis, error) {
	if opts.ShardLimit == 0 {
		opts.ShardLimit = 1000
	}
	return retryStart(func() (*Kinesis, error) { return startKinesalite(ctx, opts) })
}

func startKinesalite(ctx context.Context, opts KinesaliteOptions) (*Kinesis, error) {
	node, nm, err := nodePackage("kinesalite", "package.json", "kinesalite")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	script := fmt.Sprintf(`require('kinesalite')({createStreamMs:0,deleteStreamMs:0,updateStreamMs:0,shardLimit:%d}).listen(%d,'127.0.0.1',function(err){if(err){console.error(err);process.exit(1)}})`, opts.ShardLimit, port)
	p, err := startProcess(KindKinesalite, []string{"NODE_PATH=" + nm}, nm, node, "-e", script)
	if err != nil {
		return nil, err
	}
	k := &Kinesis{Kind: KindKinesalite, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, proc: p}
	return k, waitReady(ctx, p, 30*time.Second, func(ctx context.Context) error {
		_, err := k.Client().ListStreams(ctx, &kinesis.ListStreamsInput{})
		return err
	})
}

// StartEmulator starts the named emulator.
func StartEmulator(ctx context.Context, kind string) (*Kinesis, error) {
	switch kind {
	case KindKinesisMock:
		return StartKinesisMock(ctx)
	case KindKinesalite:
		return StartKinesalite(ctx)
	}
	return nil, fmt.Errorf("unknown emulator %q: use %s or %s", kind, KindKinesisMock, KindKinesalite)
}

// NewKinesisMock starts kinesis-mock for a test and stops it at the end.
func NewKinesisMock(tb testing.TB) *Kinesis { return newEmulator(tb, KindKinesisMock) }

// NewKinesalite starts kinesalite for a test and stops it at the end.
func NewKinesalite(tb testing.TB) *Kinesis { return newEmulator(tb, KindKinesalite) }

// NewEmulator starts the named emulator for a test.
func NewEmulator(tb testing.TB, kind string) *Kinesis { return newEmulator(tb, kind) }

func newEmulator(tb testing.TB, kind string) *Kinesis {
	tb.Helper()
	k, err := StartEmulator(tb.Context(), kind)
	Require(tb, "starting "+kind, err)
	tb.Cleanup(k.Close)
	return k
}

// Client returns a Kinesis client for the emulator with static test
// credentials (see KinesisClient). It keeps the SDK's default retries: it
// is for test set-up, not the code under test.
func (k *Kinesis) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	return KinesisClient(k.Endpoint, optFns...)
}

// KinesisClient returns a Kinesis client for endpoint with the region and
// static credentials the emulators accept, for test set-up, the chaos
// runner and load generators. optFns adjust it (retries, timeouts, the
// HTTP client); whatever HTTP client they leave, its request bodies are
// then wrapped as the connector's own client wraps them
// (awsconf.ReadOnlyBodies). Without that, a server answering within
// microseconds, as the simulator and the tests' fakes do, fails a call
// every few hundred after it acted on it, and the SDK's retry of a
// PutRecords writes its records twice.
func KinesisClient(endpoint string, optFns ...func(*kinesis.Options)) *kinesis.Client {
	optFns = append(slices.Clip(optFns), func(o *kinesis.Options) { o.HTTPClient = awsconf.ReadOnlyBodies(o.HTTPClient) })
	return kinesis.New(kinesis.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}, optFns...)
}

// CreateStream creates a provisioned stream with the given shard count and
// waits until it is ACTIVE. It returns the stream's ARN (kinesalite makes
// one up too, though it rejects requests that name a stream by it).
func (k *Kinesis) CreateStream(ctx context.Context, name string, shards int) (string, error) {
	c := k.Client()
	_, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(int32(shards)),
	})
	if err != nil {
		return "", fmt.Errorf("creating stream %s: %w", name, err)
	}
	return k.WaitActive(ctx, name)
}

// WaitActive waits up to a minute until the stream is ACTIVE and returns
// its ARN.
func (k *Kinesis) WaitActive(ctx context.Context, name string) (string, error) {
	return k.WaitActiveWithin(ctx, name, time.Minute)
}

// describeTimeout bounds one DescribeStreamSummary of WaitActiveWithin: an
// emulator under load can leave a request unanswered (kinesis-mock during
// the soak's hour with efo), and the next one is answered.
const describeTimeout = 10 * time.Second

// WaitActiveWithin waits up to limit until the stream is ACTIVE and
// returns its ARN.
func (k *Kinesis) WaitActiveWithin(ctx context.Context, name string, limit time.Duration) (string, error) {
	c := k.Client()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	status := types.StreamStatus("unknown")
	for {
		call, end := context.WithTimeout(ctx, describeTimeout)
		out, err := c.DescribeStreamSummary(call, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		end()
		if err == nil {
			status = out.StreamDescriptionSummary.StreamStatus
			if status == types.StreamStatusActive {
				return aws.ToString(out.StreamDescriptionSummary.StreamARN), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for stream %s to be ACTIVE: %v (last status seen %s, last error %v)", name, ctx.Err(), status, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// MustCreateStream is CreateStream failing the test on error.
func (k *Kinesis) MustCreateStream(tb testing.TB, name string, shards int) string {
	tb.Helper()
	arn, err := k.CreateStream(tb.Context(), name, shards)
	if err != nil {
		tb.Fatal(err)
	}
	return arn
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
