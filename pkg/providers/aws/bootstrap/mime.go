package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
)

// Boundary is the MIME boundary of the multipart documents Karpenter
// writes, as upstream's.
const Boundary = "//"

// Part is one part of a MIME multipart user data.
type Part struct {
	Header  textproto.MIMEHeader
	Content string
}

// ContentType is the part's media type without parameters ("" if none).
func (p Part) ContentType() string {
	mt, _, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

func newPart(contentType, content string) Part {
	return Part{Header: textproto.MIMEHeader{"Content-Type": {contentType}}, Content: content}
}

// IsMIME reports whether user data is a MIME document, by upstream's test
// (it starts with a MIME-Version or Content-Type header).
func IsMIME(userData string) bool {
	t := strings.TrimSpace(userData)
	return strings.HasPrefix(t, "MIME-Version:") || strings.HasPrefix(t, "Content-Type:")
}

// ParseMIME splits a MIME multipart document into its parts, headers kept
// as written (no transfer decoding: the parts are copied, not read). A
// document whose closing delimiter is missing, as in upstream's own
// AL2023 example, ends after its last complete part.
func ParseMIME(userData string) ([]Part, error) {
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(userData, " \t\r\n")))
	if err != nil {
		return nil, fmt.Errorf("reading MIME user data: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("MIME user data has no valid Content-Type: %w", err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("MIME user data is %s, not multipart", mediaType)
	}
	if params["boundary"] == "" {
		return nil, errors.New("MIME user data has no boundary")
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []Part
	for {
		p, err := r.NextRawPart()
		if errors.Is(err, io.EOF) || (err != nil && len(parts) > 0 && errors.Is(err, io.ErrUnexpectedEOF)) {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading MIME part %d: %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("reading MIME part %d: %w", len(parts)+1, err)
		}
		parts = append(parts, Part{Header: p.Header, Content: string(body)})
		if err != nil {
			// The document ended inside this part: nothing follows it.
			return parts, nil
		}
	}
}

// WriteMIME serialises parts as a multipart/mixed document with Boundary.
// Carriage returns are dropped, as upstream does, so the document is LF
// only like the rest of the user data.
func WriteMIME(parts []Part) (string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(Boundary); err != nil {
		return "", fmt.Errorf("setting MIME boundary: %w", err)
	}
	buf.WriteString("MIME-Version: 1.0\n")
	fmt.Fprintf(&buf, "Content-Type: multipart/mixed; boundary=%q\n\n", Boundary)
	for i, p := range parts {
		pw, err := w.CreatePart(p.Header)
		if err != nil {
			return "", fmt.Errorf("writing MIME part %d: %w", i+1, err)
		}
		if _, err := io.WriteString(pw, p.Content); err != nil {
			return "", fmt.Errorf("writing MIME part %d: %w", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("closing MIME document: %w", err)
	}
	return strings.ReplaceAll(buf.String(), "\r", ""), nil
}
