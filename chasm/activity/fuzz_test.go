package activity_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/chasm/activity"
	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// FuzzDecodeTaskToken checks that any bytes a worker sends as a task token decode to a token
// naming an attempt or fail with an error, never a panic, and that a decoded token encodes to
// bytes that decode to the same token.
// `go test` runs only the seeds; fuzz with `go test -fuzz FuzzDecodeTaskToken ./chasm/activity`.
func FuzzDecodeTaskToken(f *testing.F) {
	good, err := activity.EncodeTaskToken(&activitypb.TaskToken{NamespaceId: "ns", ActivityId: "a", RunId: "r", Stamp: 3, Attempt: 2})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		tok, err := activity.DecodeTaskToken(raw)
		if err != nil {
			return
		}
		if tok.GetActivityId() == "" || tok.GetRunId() == "" || tok.GetStamp() <= 0 {
			t.Fatalf("DecodeTaskToken(%x) accepted a token naming no attempt: %v", raw, tok)
		}
		again, err := activity.EncodeTaskToken(tok)
		if err != nil {
			t.Fatalf("a decoded token does not encode: %v", err)
		}
		back, err := activity.DecodeTaskToken(again)
		if err != nil || !proto.Equal(tok, back) {
			t.Fatalf("token %v changed on a round trip: %v (%v)", tok, back, err)
		}
	})
}
