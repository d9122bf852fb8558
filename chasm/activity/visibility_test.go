package activity_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"google.golang.org/protobuf/proto"

	activitypb "github.com/vigilhq/vigil/chasm/activity/gen/activitypb/v1"
)

// The search attributes and user metadata of a start are kept as the frontend validated them.
func TestStartKeepsSearchAttributesAndUserMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sa := &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
		"Amount": {Metadata: map[string][]byte{"encoding": []byte("json/plain"), "type": []byte("Int")}, Data: []byte("42")},
	}}
	um := &sdkpb.UserMetadata{
		Summary: &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"charge"`)},
		Details: &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"details"`)},
	}
	b.start("a1", func(r *activitypb.StartActivityRequest) { r.SearchAttributes, r.UserMetadata = sa, um })
	state := b.describe("a1")
	require.True(t, proto.Equal(sa, state.GetSearchAttributes()), "%v", state.GetSearchAttributes())
	require.True(t, proto.Equal(um, state.GetUserMetadata()), "%v", state.GetUserMetadata())
}
