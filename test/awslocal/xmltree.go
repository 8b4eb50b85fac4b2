package awslocal

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// xnode is a raw XML element: names keep their prefixes and attributes
// stay as written, so a moto answer round-trips byte-for-byte apart from
// the edits the front makes (encoding/xml's namespace handling would
// re-declare xmlns on every element).
type xnode struct {
	Name     string
	Attrs    []xml.Attr
	Text     string
	Children []*xnode
}

func parseXML(doc []byte) (*xnode, error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var stack []*xnode
	var root *xnode
	for {
		tok, err := dec.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parsing XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &xnode{Name: rawName(t.Name), Attrs: append([]xml.Attr(nil), t.Attr...)}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.Children = append(p.Children, n)
			} else if root == nil {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].Text += string(t)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("parsing XML: no root element")
	}
	return root, nil
}

func rawName(n xml.Name) string {
	if n.Space != "" {
		return n.Space + ":" + n.Local
	}
	return n.Local
}

func (n *xnode) bytes() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	n.write(&b)
	return b.Bytes()
}

func (n *xnode) write(b *bytes.Buffer) {
	b.WriteString("<" + n.Name)
	for _, a := range n.Attrs {
		fmt.Fprintf(b, ` %s="%s"`, rawName(a.Name), xmlText(a.Value))
	}
	b.WriteString(">")
	if len(n.Children) == 0 {
		b.WriteString(xmlText(n.Text))
	}
	for _, c := range n.Children {
		c.write(b)
	}
	b.WriteString("</" + n.Name + ">")
}

// child is the first child named name, or nil.
func (n *xnode) child(name string) *xnode {
	if n == nil {
		return nil
	}
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// path follows child names; nil when any is missing.
func (n *xnode) path(names ...string) *xnode {
	for _, name := range names {
		n = n.child(name)
	}
	return n
}

// text is the trimmed text of the descendant at names.
func (n *xnode) text(names ...string) string {
	c := n.path(names...)
	if c == nil {
		return ""
	}
	return strings.TrimSpace(c.Text)
}

// items are the <item> children of the descendant at names.
func (n *xnode) items(names ...string) []*xnode {
	c := n.path(names...)
	if c == nil {
		return nil
	}
	var out []*xnode
	for _, it := range c.Children {
		if it.Name == "item" {
			out = append(out, it)
		}
	}
	return out
}

// set replaces (or appends) the child named name.
func (n *xnode) set(c *xnode) {
	for i, have := range n.Children {
		if have.Name == c.Name {
			n.Children[i] = c
			return
		}
	}
	n.Children = append(n.Children, c)
}

// el builds an element from text or children.
func el(name string, children ...*xnode) *xnode { return &xnode{Name: name, Children: children} }

func leaf(name, text string) *xnode { return &xnode{Name: name, Text: text} }
