// Package awsconf holds the AWS fields shared by the kinesis input and output
// (`region`, `endpoint`, `credentials`), with the names and meaning Redpanda
// Connect uses, and turns them into an aws.Config and a Kinesis client.
package awsconf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Field names.
const (
	FieldRegion         = "region"
	FieldEndpoint       = "endpoint"
	FieldCredentials    = "credentials"
	FieldProfile        = "profile"
	FieldID             = "id"
	FieldSecret         = "secret"
	FieldToken          = "token"
	FieldRole           = "role"
	FieldRoleExternalID = "role_external_id"
)

// Fields returns the AWS fields a Kinesis plugin embeds at its top level.
func Fields() []*service.ConfigField {
	return []*service.ConfigField{
		service.NewStringField(FieldRegion).
			Description("The AWS region of the stream. Empty uses the region of the default chain (`AWS_REGION`, the shared config file).").
			Default(""),
		service.NewURLField(FieldEndpoint).
			Description("A custom endpoint URL for Kinesis, e.g. a local emulator or a VPC endpoint. Empty uses the region's AWS endpoint.").
			Default("").Advanced(),
		service.NewObjectField(FieldCredentials,
			service.NewStringField(FieldProfile).
				Description("A profile from `~/.aws/credentials` to use.").
				Default(""),
			service.NewStringField(FieldID).
				Description("The ID of static credentials to use.").
				Default(""),
			service.NewStringField(FieldSecret).
				Description("The secret of static credentials to use.").
				Default("").Secret(),
			service.NewStringField(FieldToken).
				Description("The session token of static credentials to use.").
				Default("").Secret(),
			service.NewStringField(FieldRole).
				Description("The ARN of a role to assume (through STS) with the credentials above or the default chain.").
				Default(""),
			service.NewStringField(FieldRoleExternalID).
				Description("An external ID to present when assuming `role`.").
				Default(""),
		).Description("Optional credentials. With none set, the SDK's default chain is used (environment, shared files, container or instance role).").
			Advanced(),
	}
}

// Settings is the parsed form of Fields.
type Settings struct {
	Region         string
	Endpoint       string
	Profile        string
	ID             string
	Secret         string
	Token          string
	Role           string
	RoleExternalID string
}

// SettingsFromParsed reads the fields added by Fields.
func SettingsFromParsed(conf *service.ParsedConfig) (Settings, error) {
	var s Settings
	var err error
	if s.Region, err = conf.FieldString(FieldRegion); err != nil {
		return s, err
	}
	if s.Endpoint, err = conf.FieldString(FieldEndpoint); err != nil {
		return s, err
	}
	c := conf.Namespace(FieldCredentials)
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{FieldProfile, &s.Profile}, {FieldID, &s.ID}, {FieldSecret, &s.Secret},
		{FieldToken, &s.Token}, {FieldRole, &s.Role}, {FieldRoleExternalID, &s.RoleExternalID},
	} {
		if *f.dst, err = c.FieldString(f.name); err != nil {
			return s, err
		}
	}
	return s, s.Validate()
}

// Validate names what is inconsistent and how to fix it.
func (s Settings) Validate() error {
	if (s.ID == "") != (s.Secret == "") {
		return errors.New("fields credentials.id and credentials.secret: set both for static credentials, or neither to use a profile or the default chain")
	}
	if s.ID != "" && s.Profile != "" {
		return errors.New("fields credentials.id and credentials.profile: set static keys or a profile, not both")
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("field endpoint: %q is not an http(s) URL; write it as http://host:port or https://host", s.Endpoint)
		}
	}
	if s.RoleExternalID != "" && s.Role == "" {
		return errors.New("field credentials.role_external_id: it needs credentials.role, the ARN of the role to assume")
	}
	if s.Region != "" && s.Endpoint == "" && !regionPattern.MatchString(s.Region) {
		return fmt.Errorf("field region: %q is not an AWS region name; write it like us-east-1", s.Region)
	}
	return nil
}

// Load resolves the settings into an aws.Config.
//
// The SDK's own retries are switched off (aws.NopRetryer): every retry in this
// project goes through failsafe-go with the one classifier in kinesisx, so a
// retried call is retried exactly as the user's `max_retries`/`backoff` say,
// not that many times the SDK's default three attempts.
func (s Settings) Load(ctx context.Context) (aws.Config, error) {
	return s.LoadLogged(ctx, nil)
}

// LoadLogged is Load with the SDK's log lines (a fallback to IMDSv1, a
// response it could not read) going to log, tagged `source: aws-sdk`, in the
// Benthos logger's format and at the matching level. A nil log leaves the
// SDK's own logger (stderr), for commands that have no Benthos logger.
func (s Settings) LoadLogged(ctx context.Context, log *service.Logger) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithHTTPClient(httpClient()),
	}
	if log != nil {
		opts = append(opts, config.WithLogger(sdkLogger{log.With("source", "aws-sdk")}))
	}
	if s.Region != "" {
		opts = append(opts, config.WithRegion(s.Region))
	}
	if s.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(s.Profile))
	}
	if s.ID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(s.ID, s.Secret, s.Token)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, kinesisx.MarkPermanent(errors.New("field region: no region is set here or in the default chain; set `region` (e.g. us-east-1) or AWS_REGION"))
	}
	if s.Endpoint == "" {
		if err := checkRegion(ctx, cfg.Region); err != nil {
			return aws.Config{}, kinesisx.MarkPermanent(err)
		}
	}
	if s.Role != "" {
		stsClient := sts.NewFromConfig(cfg)
		provider := stscreds.NewAssumeRoleProvider(stsClient, s.Role, func(o *stscreds.AssumeRoleOptions) {
			if s.RoleExternalID != "" {
				o.ExternalID = aws.String(s.RoleExternalID)
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(provider)
	}
	if cfg.Credentials != nil {
		cfg.Credentials = aws.NewCredentialsCache(explainedCredentials{provider: cfg.Credentials, settings: s})
	}
	return cfg, nil
}

// lookupHost resolves a host name; tests replace it.
var lookupHost = net.DefaultResolver.LookupHost

// checkRegion fails, naming the field, for a region that cannot be right: one
// not shaped like a region name (it may come from AWS_REGION), or one whose
// Kinesis endpoint does not exist in DNS. Without this a misspelt region is a
// network error, retried as a transient fault and reported nowhere. A DNS
// failure other than "no such host" proves nothing and is left to the
// request; so is a proxied network, where only the proxy resolves names.
func checkRegion(ctx context.Context, region string) error {
	if !regionPattern.MatchString(region) {
		return fmt.Errorf("field region: %q is not an AWS region name; write it like us-east-1 (here or in AWS_REGION)", region)
	}
	ep, err := kinesis.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, kinesis.EndpointParameters{Region: aws.String(region)})
	if err != nil {
		return fmt.Errorf("field region: resolving the Kinesis endpoint of %q: %w", region, err)
	}
	if proxy, err := http.ProxyFromEnvironment(&http.Request{URL: &ep.URI}); err != nil || proxy != nil {
		return nil
	}
	host := ep.URI.Hostname()
	if _, err := lookupHost(ctx, host); err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			// The same answer comes from a misspelt region and from a
			// machine whose DNS resolves no AWS name: name both.
			return fmt.Errorf("field region: the Kinesis endpoint of %q, %s, does not resolve here: either the region name is wrong (write it like us-east-1), or this machine's DNS cannot resolve AWS names (then set endpoint to a Kinesis it reaches: a VPC endpoint, a proxy or an emulator)", region, host)
		}
	}
	return nil
}

// KinesisClient builds a Kinesis client for cfg, aimed at the settings'
// endpoint when one is set. The endpoint applies to Kinesis only, so STS
// (assume-role) still reaches AWS.
//
// The request bodies are wrapped (readOnlyBodies) here, in an option, and
// not in cfg: options run after the client has resolved its HTTP client,
// and the SDK adds AWS_CA_BUNDLE and the AWS_DEFAULTS_MODE timeouts only to
// its own client type, so a wrapper seen earlier would make it skip them.
func (s Settings) KinesisClient(cfg aws.Config) *kinesis.Client {
	return kinesis.NewFromConfig(cfg, func(o *kinesis.Options) {
		if s.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.Endpoint)
		}
		o.HTTPClient = ReadOnlyBodies(o.HTTPClient)
	})
}

// idleConnTimeout is how long an unused connection is kept for the next
// request. It must be shorter than the server's own keep-alive, or a request
// can be sent on a connection at the instant the server closes it: the
// request then fails (EOF, connection reset) and costs a retry. Servers
// close idle connections after 5 s (Node's default, kinesalite's) to 60 s
// (kinesis-mock, load balancers); the SDK's 90 s outlived both, so the
// output's shard map refresh (every minute) met kinesis-mock's close about
// every other time. Under load a connection never idles this long, so the
// price is one new connection after a pause.
const idleConnTimeout = 4 * time.Second

// httpClient keeps enough idle connections per host for the output's
// concurrent PutRecords and the input's per-shard readers; the SDK default
// transport keeps few, and reconnecting costs more than the request.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithTimeout(0).
		WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = 512
			t.MaxIdleConnsPerHost = 256
			t.IdleConnTimeout = idleConnTimeout
		})
}

// ReadOnlyBodies wraps an SDK client's HTTP client so that the transport
// sees each request's body as a plain reader. Every Kinesis client that
// talks to a server over HTTP/1.1 needs it, the connector's own (see
// KinesisClient) as much as a test's set-up client or a load generator:
// without it, an answer that arrives while the transport is finishing the
// request makes the call fail after the server acted on it (see
// readOnlyBodies). Set it as the last word on HTTPClient, after any option
// that replaces the HTTP client; wrapping twice changes nothing.
func ReadOnlyBodies(client aws.HTTPClient) aws.HTTPClient {
	if _, ok := client.(readOnlyBodies); ok {
		return client
	}
	return readOnlyBodies{client}
}

// readOnlyBodies gives the transport each request's body as a plain reader.
// The SDK closes a request's body as soon as the answer's headers arrive,
// and from then on the body answers WriteTo with io.EOF. Go's transport
// reads a body once more after its Content-Length (through WriteTo when
// the body has it), and when the answer came first it takes that io.EOF
// for a failed write and closes the connection under the answer being
// read: the call fails with "use of closed network connection" after the
// service acted on it, and a retried PutRecords writes its records twice.
// The window is the time between the transport's last write of the body
// and that extra read: microseconds, unless the writing goroutine is
// descheduled there, as on a loaded machine; a server answering within
// microseconds meets it every few hundred calls. Through Read, a closed
// body ends with io.EOF, which is no error, so no answer can be cut.
type readOnlyBodies struct{ client aws.HTTPClient }

func (c readOnlyBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readOnlyBody{req.Body}
	}
	return c.client.Do(req)
}

// readOnlyBody hides every method of a body but Read and Close.
type readOnlyBody struct{ io.ReadCloser }
