package faultproxy

import (
	"encoding/json"
	"net/http"
	"strings"
)

// CodeAccessDenied is the error code of a request the caller's role may
// not make.
const CodeAccessDenied = "AccessDeniedException"

// DenyStream is a Rule.Hook that answers every request naming stream (by
// its name, or an ARN ending in it) with AccessDeniedException, as Kinesis
// does for a role without the permission; requests for other streams go
// on. Set it on GetShardIterator (or GetRecords, SubscribeToShard) to have
// one stream of an input fail every read while the others are served.
func DenyStream(stream string) func(op string, body []byte) *Response {
	return func(op string, body []byte) *Response {
		var req struct{ StreamName, StreamARN string }
		if json.Unmarshal(body, &req) != nil {
			return nil
		}
		if req.StreamName != stream && !strings.HasSuffix(req.StreamARN, ":stream/"+stream) {
			return nil
		}
		return &Response{Status: http.StatusBadRequest, Body: errorBody(CodeAccessDenied,
			"User is not authorized to perform: kinesis:"+op+" on resource "+stream+" (injected by the fault proxy).")}
	}
}
