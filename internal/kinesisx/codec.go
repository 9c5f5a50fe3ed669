package kinesisx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// WithRecordsCodec is a per-call option of PutRecords and GetRecords that
// encodes and decodes their bodies with less work than the SDK's generic
// JSON codec, for the same JSON on the wire and the same values returned:
//
//	out, err := client.PutRecords(ctx, in, kinesisx.WithRecordsCodec)
//
// These two calls carry every record, so their bodies are most of the CPU
// a connector spends outside the pipeline:
//   - A PutRecords body is written in one pass into a buffer sized up front.
//     The SDK's encoder starts every request at 1 KiB, grows it by doubling
//     (for 500 records of 200 bytes, about eight copies of a 160 KiB body)
//     and copies the result once more.
//   - A successful answer is decoded without a generic parser, with a few
//     allocations for the strings and pointers of all results instead of
//     several per record. A PutRecords answer is read into a buffer of its
//     Content-Length (the SDK grows a pooled one); a GetRecords answer is
//     decoded as it streams in, so its body (up to 14 MiB of base64) is not
//     held next to its records.
//
// Whatever the codec does not expect goes to the SDK unchanged: requests
// with fields it does not write (DryRun, StreamId), error answers, and
// answers with escaped strings, child shards, a field it does not know (a
// newer API's) or anything else it does not read; the SDK then decodes the
// body it read. The method, path, headers and
// signing are always the SDK's; the signature's hash of a body the codec
// wrote is taken of the body in memory, where the SDK's would copy it
// through a 32 KiB buffer of its own per request.
func WithRecordsCodec(o *kinesis.Options) {
	if o.Protocol != nil {
		o.Protocol = recordsProtocol{o.Protocol}
		o.APIOptions = append(o.APIOptions, addBodyHash)
	}
}

// computePayloadHashID is the SDK's middleware that hashes the body for
// SigV4; bodyHash runs just before it, and it passes over a request whose
// hash is already set.
var computePayloadHashID = (*v4.ComputePayloadSHA256)(nil).ID()

// addBodyHash puts bodyHash before the SDK's body hash, if the stack has
// one (without it, nothing is signed with a body hash).
func addBodyHash(stack *middleware.Stack) error {
	if _, ok := stack.Finalize.Get(computePayloadHashID); !ok {
		return nil
	}
	return stack.Finalize.Insert(bodyHash{}, computePayloadHashID, middleware.Before)
}

// bodyHash sets the SigV4 payload hash of a body the codec wrote, from
// the bytes themselves; any other request is left to the SDK.
type bodyHash struct{}

func (bodyHash) ID() string { return "KinesisxBodyHash" }

func (bodyHash) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if body, ok := req.GetStream().(requestBody); ok {
			sum := sha256.Sum256(body.b)
			ctx = v4.SetPayloadHash(ctx, hex.EncodeToString(sum[:]))
		}
	}
	return next.HandleFinalize(ctx, in)
}

// recordsProtocol is the client's protocol with the bodies of PutRecords and
// GetRecords handled by the codec; everything else is the embedded
// protocol's.
type recordsProtocol struct {
	smithyhttp.ClientProtocol
}

func (p recordsProtocol) SerializeRequest(ctx context.Context, schema *smithy.OperationSchema, in smithy.Serializable, req *smithyhttp.Request) error {
	put, ok := in.(*kinesis.PutRecordsInput)
	if !ok || put.DryRun != nil || put.StreamId != nil {
		return p.ClientProtocol.SerializeRequest(ctx, schema, in, req)
	}
	// The SDK's protocol sets the method, path and headers; it is given
	// nothing to encode, and the body is set after it.
	if err := p.ClientProtocol.SerializeRequest(ctx, schema, noMembers{}, req); err != nil {
		return err
	}
	body := AppendPutRecords(nil, put)
	sreq, err := req.SetStream(requestBody{r: bytes.NewReader(body), b: body})
	if err != nil {
		return fmt.Errorf("setting the PutRecords body: %w", err)
	}
	*req = *sreq
	return nil
}

// requestBody is a request body that can be read and rewound (for a retry)
// but has no WriteTo. The SDK wraps a body in a closer that it closes as
// soon as the answer's headers arrive, and whose WriteTo returns io.EOF once
// closed. After copying a body's Content-Length, net/http copies what is
// left of it to check that nothing is, and a body with WriteTo is copied
// through it: a server that answers within microseconds of the last byte
// (kinesalite, a busy client) has the SDK close the body first, that check
// fails with io.EOF, and net/http closes the connection under the answer
// being read ("use of closed network connection" on a 200: the request's
// records, already written, are sent again). Through Read, a closed body
// just ends (0, io.EOF), which is what the check expects.
//
// b is the whole body, for its hash (bodyHash).
type requestBody struct {
	r *bytes.Reader
	b []byte
}

func (b requestBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b requestBody) Seek(offset int64, whence int) (int64, error) { return b.r.Seek(offset, whence) }

// noMembers is an input that writes nothing.
type noMembers struct{}

func (noMembers) Serialize(smithy.ShapeSerializer) {}

func (p recordsProtocol) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, types *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	put, isPut := out.(*kinesis.PutRecordsOutput)
	get, isGet := out.(*kinesis.GetRecordsOutput)
	if !isPut && !isGet || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return p.ClientProtocol.DeserializeResponse(ctx, schema, types, resp, out)
	}
	var body []byte
	if isGet {
		// A GetRecords answer is decoded as it streams in, never held
		// whole next to its records (codec_get.go).
		ok, rest, err := decodeGetRecords(resp.Body, resp.ContentLength, get)
		if err != nil {
			return brokenBody(resp, err)
		}
		if ok {
			return nil
		}
		body = rest
	} else {
		var err error
		if body, err = readBody(resp); err != nil {
			return brokenBody(resp, err)
		}
		if len(body) > 0 && decodePutRecordsOutput(body, put) {
			return nil
		}
	}
	// The SDK decodes what the codec did not take, into a clean output.
	switch o := out.(type) {
	case *kinesis.PutRecordsOutput:
		*o = kinesis.PutRecordsOutput{}
	case *kinesis.GetRecordsOutput:
		*o = kinesis.GetRecordsOutput{}
	}
	// It reads a copy of the answer, so the body the SDK closes afterwards
	// is still the connection's own.
	again := *resp.Response
	again.Body = io.NopCloser(bytes.NewReader(body))
	return p.ClientProtocol.DeserializeResponse(ctx, schema, types, &smithyhttp.Response{Response: &again}, out)
}

// brokenBody is the error of an answer whose body failed to read (the
// connection was cut mid-answer, or the call's context ended). The body
// is closed here, which drops its connection, and the answer is left with
// an empty one: the SDK drains a body once its call returns, and draining
// one that has already failed fails again, with a WARN ("failed to discard
// remaining HTTP response body") that adds nothing to the call's error.
func brokenBody(resp *smithyhttp.Response, err error) error {
	_ = resp.Body.Close()
	resp.Body = http.NoBody
	return &smithy.DeserializationError{Err: fmt.Errorf("reading the answer: %w", err)}
}

// maxSizedBody bounds the buffer readBody sizes from a Content-Length
// alone; a GetRecords answer holds at most about 14 MiB of JSON.
const maxSizedBody = 64 << 20

// readBody reads an answer's body into a buffer of its Content-Length, when
// that is known and sane.
func readBody(resp *smithyhttp.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxSizedBody {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(resp.Body)
}
