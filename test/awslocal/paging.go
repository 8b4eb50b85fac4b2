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
	"sync"
	"time"
)

// paged serves an EC2 Describe action that moto answers in one page: it
// asks moto for everything and cuts the list element setName into pages of
// MaxResults with an opaque NextToken, as EC2 does. Without MaxResults or
// NextToken the call goes to moto unchanged. A non-nil overlay rewrites
// moto's whole answer first (what the front keeps that moto cannot), paged
// or not.
func (f *front) paged(setName string, minResults, maxResults int, overlay func(*call, []byte) ([]byte, error)) handler {
	return func(ctx context.Context, w http.ResponseWriter, c *call) bool {
		maxText, token := c.Form.Get("MaxResults"), c.Form.Get("NextToken")
		if maxText == "" && token == "" {
			if overlay == nil {
				return false
			}
			status, body, err := f.motoRaw(ctx, c.Region, c.Form)
			if err != nil || status != http.StatusOK {
				return false // the normal path answers moto's error as AWS would
			}
			if body, err = overlay(c, body); err != nil {
				writeError(w, c, http.StatusInternalServerError, "InternalError", fmt.Sprintf("overlaying moto's %s: %v", c.Action, err))
				return true
			}
			writeXML(w, body)
			return true
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
		start, snap := 0, ""
		if token != "" {
			n, id, err := decodePageToken(token, c.Action)
			if err != nil {
				writeError(w, c, http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid.")
				return true
			}
			start, snap = n, id
		}
		// Later pages reuse the snapshot the first page took: moto takes a
		// second or more to render every instance type, and a listing
		// should not shift under a paginator.
		body, ok := f.snapshots.get(snap)
		if !ok {
			form := cloneValues(c.Form)
			form.Del("MaxResults")
			form.Del("NextToken")
			var err error
			if body, err = f.motoCall(ctx, c.Service, c.Region, form); err != nil {
				var me *motoStatusError
				if errors.As(err, &me) {
					return false // the normal path turns moto's error into an AWS one
				}
				writeError(w, c, http.StatusInternalServerError, "InternalError", err.Error())
				return true
			}
			if overlay != nil {
				if body, err = overlay(c, body); err != nil {
					writeError(w, c, http.StatusInternalServerError, "InternalError", fmt.Sprintf("overlaying moto's %s: %v", c.Action, err))
					return true
				}
			}
			snap = f.snapshots.put(body)
		}
		page, err := pageXML(body, setName, start, size, func(next int) string { return encodePageToken(next, snap, c.Action) })
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

func encodePageToken(offset int, snapshot, action string) string {
	return encodeToken(offset, action+":"+snapshot)
}

func decodePageToken(token, action string) (int, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", err
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 || parts[0] != action {
		return 0, "", errors.New("token of another action")
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil || n < 0 {
		return 0, "", errors.New("bad offset")
	}
	return n, parts[1], nil
}

// snapshots keep moto's full answers for the pages after the first, for a
// few minutes (a paginator that stalls longer starts over from moto).
type snapshots struct {
	mu   sync.Mutex
	next int
	byID map[string]snapshot
}

type snapshot struct {
	body []byte
	at   time.Time
}

const snapshotTTL = 5 * time.Minute

func (s *snapshots) put(body []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]snapshot{}
	}
	for id, snap := range s.byID {
		if time.Since(snap.at) > snapshotTTL {
			delete(s.byID, id)
		}
	}
	s.next++
	id := strconv.Itoa(s.next)
	s.byID[id] = snapshot{body, time.Now()}
	return id
}

func (s *snapshots) get(id string) ([]byte, bool) {
	if id == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.byID[id]
	if !ok || time.Since(snap.at) > snapshotTTL {
		return nil, false
	}
	return snap.body, true
}
