package awslocal

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPageXML(t *testing.T) {
	doc := `<?xml version="1.0"?><R xmlns="x"><set><item><a>1</a><set><item>n</item></set></item><item><a>2</a></item><item><a>3</a></item></set><requestId>r</requestId></R>`
	tok := func(n int) string { return "T" + strconv.Itoa(n) }
	cases := []struct {
		name        string
		doc         string
		start, size int
		want        string
	}{
		{"first page keeps nested items whole", doc, 0, 1,
			`<?xml version="1.0"?><R xmlns="x"><set><item><a>1</a><set><item>n</item></set></item></set><nextToken>T1</nextToken><requestId>r</requestId></R>`},
		{"middle page", doc, 1, 1,
			`<?xml version="1.0"?><R xmlns="x"><set><item><a>2</a></item></set><nextToken>T2</nextToken><requestId>r</requestId></R>`},
		{"last page has no token", doc, 1, 5,
			`<?xml version="1.0"?><R xmlns="x"><set><item><a>2</a></item><item><a>3</a></item></set><requestId>r</requestId></R>`},
		{"past the end is empty", doc, 9, 5,
			`<?xml version="1.0"?><R xmlns="x"><set></set><requestId>r</requestId></R>`},
		{"self-closed set", `<R><set/><requestId>r</requestId></R>`, 0, 5, `<R><set/><requestId>r</requestId></R>`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pageXML([]byte(tc.doc), "set", tc.start, tc.size, tok)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
	_, err := pageXML([]byte(`<R><other/></R>`), "set", 0, 5, tok)
	require.Error(t, err)
}

func TestFaultCountAndDefaults(t *testing.T) {
	fs := &faults{}
	_, err := fs.add(Fault{Service: "ec2", Action: "CreateFleet", Kind: FaultThrottle, Count: 2})
	require.NoError(t, err)
	ec2Call := &call{Service: "ec2", Action: "CreateFleet", Protocol: protoEC2}
	other := &call{Service: "ec2", Action: "DescribeInstances", Protocol: protoEC2}
	hit := func(c *call) *Fault { f, _ := fs.take(t.Context(), c); return f }
	require.Nil(t, hit(other))
	f := hit(ec2Call)
	require.Equal(t, "RequestLimitExceeded", f.Code)
	require.Equal(t, 503, f.Status)
	require.NotNil(t, hit(ec2Call))
	require.Nil(t, hit(ec2Call), "spent after Count hits")

	_, err = fs.add(Fault{Kind: FaultServerError})
	require.NoError(t, err)
	f = hit(&call{Service: "ssm", Action: "GetParameter", Protocol: protoJSON11})
	require.Equal(t, "InternalServerError", f.Code)
	require.Equal(t, 500, f.Status)
	require.Equal(t, 1, fs.clear("", ""))

	// latency-after serves first and reports the hold-back; it is no
	// error, and spent after Count hits like the others.
	_, err = fs.add(Fault{Service: "ec2", Action: "CreateFleet", Kind: FaultLatencyAfter, LatencyText: "3s", Count: 1})
	require.NoError(t, err)
	f, after := fs.take(t.Context(), ec2Call)
	require.Nil(t, f)
	require.Equal(t, 3*time.Second, after)
	_, after = fs.take(t.Context(), ec2Call)
	require.Zero(t, after)
}
