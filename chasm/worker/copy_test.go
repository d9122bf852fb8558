package worker_test

import (
	"testing"

	"github.com/vigilhq/vigil/chasm/chasmtest"
	"github.com/vigilhq/vigil/chasm/worker"
)

func TestShallowCopyCopiesEveryField(t *testing.T) {
	t.Parallel()
	chasmtest.CheckShallowCopy(t, worker.ShallowCopy)
}
