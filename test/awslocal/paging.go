package awslocal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// paged serves an EC2 Describe action that moto answers in one page: it
// asks moto for everything and cuts the list element setName into pages of
// MaxResults with an opaque NextToken, as EC2 does. Without MaxResults or
// NextToken the call goes to moto unchanged.
func (f *front) paged(setName string, minResults, maxResults int) handler {
	return func(ctx context.Context, w http.ResponseWriter, c *call) bool {
		maxText, token := c.Form.Get("MaxResults"), c.Form.Get("NextToken")
		if maxText == "" && token == "" {
			return false
		}
		size := maxResults
		if maxText != "" {
			n, err := strconv.Atoi(maxText)
			if err != nil || n < minResults || n > maxResults {
				writeError(w, c, http.StatusBadRequest, "InvalidParameterValue",
					fmt.Sprintf("Value ( %s ) for parameter maxResults is invalid. Parameter must be between %d and %d.", maxText, minResults, maxResults))
				return true
			}
			size = n
		}
		start := 0
		if token != "" {
			n, err := decodeToken(token, c.Action)
			if err != nil {
				writeError(w, c, http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid.")
				return true
			}
			start = n
		}
		form := cloneValues(c.Form)
		form.Del("MaxResults")
		form.Del("NextToken")
		// Ids in the request make EC2 refuse MaxResults; moto does not care.
		body, err := f.motoCall(ctx, c.Service, c.Region, form)
		if err != nil {
			var me *motoStatusError
			if errors.As(err, &me) {
				return false // let the normal path turn moto's error into an AWS one
			}
			writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
			return true
		}
		page, err := pageXML(body, setName, start, size, func(next int) string { return encodeToken(next, c.Action) })
		if err != nil {
			writeError(w, c, http.StatusInternalServerError, "InternalError", fmt.Sprintf("paging moto's %s: %v", c.Action, err))
			return true
		}
		writeXML(w, page)
		return true
	}
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// A token names the action it belongs to so a token from one call is not
// silently accepted by another.
func encodeToken(offset int, action string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(action + ":" + strconv.Itoa(offset)))
}

func decodeToken(token, action string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, err
	}
	prefix := action + ":"
	if !strings.HasPrefix(string(b), prefix) {
		return 0, errors.New("token of another action")
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), prefix))
	if err != nil || n < 0 {
		return 0, errors.New("bad offset")
	}
	return n, nil
}

// pageXML keeps items [start, start+size) of the top-level list element
// setName in doc and adds <nextToken> when more remain.
func pageXML(doc []byte, setName string, start, size int, token func(next int) string) ([]byte, error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	depth, setDepth := 0, -1
	var contentStart, contentEnd int64 = -1, -1
	var items [][2]int64
	var itemStart int64
	for {
		before := dec.InputOffset()
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if setDepth == -1 && depth == 2 && t.Name.Local == setName {
				setDepth = depth
				contentStart = dec.InputOffset()
			} else if setDepth > 0 && depth == setDepth+1 {
				itemStart = before
			}
		case xml.EndElement:
			if setDepth > 0 && depth == setDepth+1 {
				items = append(items, [2]int64{itemStart, dec.InputOffset()})
			}
			if setDepth > 0 && depth == setDepth {
				contentEnd = before
				setDepth = -2 // done; ignore any later element of the same name
			}
			depth--
		}
	}
	if contentStart < 0 {
		return nil, fmt.Errorf("no <%s> in the response", setName)
	}
	if contentEnd < 0 || contentEnd == contentStart {
		// An empty or self-closed <set/>: nothing to page.
		return doc, nil
	}
	if start > len(items) {
		start = len(items)
	}
	end := min(start+size, len(items))
	var out bytes.Buffer
	out.Write(doc[:contentStart])
	for _, it := range items[start:end] {
		out.Write(doc[it[0]:it[1]])
	}
	rest := doc[contentEnd:]
	closing := "</" + setName + ">"
	i := bytes.Index(rest, []byte(closing))
	if i < 0 {
		return nil, fmt.Errorf("no %s in the response", closing)
	}
	out.Write(rest[:i+len(closing)])
	if end < len(items) {
		out.WriteString("<nextToken>" + token(end) + "</nextToken>")
	}
	out.Write(rest[i+len(closing):])
	return out.Bytes(), nil
}
