package awslocal

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"

	"github.com/google/uuid"
)

// protocol is the wire protocol of a call, which decides the shape of its
// errors.
type protocol int

const (
	protoEC2    protocol = iota // EC2 Query: <Response><Errors><Error>
	protoQuery                  // AWS Query (IAM, STS): <ErrorResponse><Error>
	protoJSON10                 // AWS JSON 1.0 (SQS)
	protoJSON11                 // AWS JSON 1.1 (SSM, Pricing)
	protoREST                   // REST-JSON (EKS)
)

func (p protocol) isJSON() bool { return p == protoJSON10 || p == protoJSON11 }

// writeError answers the call with an AWS error of its protocol, in the
// shape the SDK's deserializers read the error code from.
func writeError(w http.ResponseWriter, c *call, status int, code, message string) {
	reqID := uuid.NewString()
	h := w.Header()
	h.Set("X-Amzn-Requestid", reqID)
	switch c.Protocol {
	case protoEC2:
		h.Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
			xmlText(code), xmlText(message), reqID)
	case protoQuery:
		h.Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		kind := "Sender"
		if status >= 500 {
			kind = "Receiver"
		}
		fmt.Fprintf(w, `<ErrorResponse><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
			kind, xmlText(code), xmlText(message), reqID)
	default:
		ct := "application/x-amz-json-1.1"
		switch c.Protocol {
		case protoJSON10:
			ct = "application/x-amz-json-1.0"
		case protoREST:
			ct = "application/json"
		}
		h.Set("Content-Type", ct)
		h.Set("X-Amzn-Errortype", code)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
	}
}

func xmlText(s string) string {
	var b []byte
	w := &byteWriter{&b}
	_ = xml.EscapeText(w, []byte(s))
	return string(b)
}

type byteWriter struct{ b *[]byte }

func (w *byteWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// writeJSON answers a JSON-protocol call successfully.
func writeJSON(w http.ResponseWriter, c *call, v any) {
	ct := "application/x-amz-json-1.1"
	if c.Protocol == protoJSON10 {
		ct = "application/x-amz-json-1.0"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Amzn-Requestid", uuid.NewString())
	_ = json.NewEncoder(w).Encode(v)
}

// writeXML answers an EC2 call successfully with a complete document.
func writeXML(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write(body)
}

func newRequestID() string { return uuid.NewString() }
