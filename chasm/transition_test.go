package chasm_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/chasm"
)

type lightState int

const (
	lightOff lightState = iota
	lightOn
	lightBroken
)

type light struct {
	state    lightState
	switches int
}

func (l *light) StateMachineState() lightState     { return l.state }
func (l *light) SetStateMachineState(s lightState) { l.state = s }

type flip struct{ failWith error }

var (
	transitionSwitchOn = chasm.NewTransition([]lightState{lightOff}, lightOn,
		func(l *light, _ chasm.MutableContext, ev flip) error {
			if ev.failWith != nil {
				return ev.failWith
			}
			l.switches++
			return nil
		})
	transitionBreak = chasm.NewTransition([]lightState{lightOff, lightOn}, lightBroken,
		func(l *light, _ chasm.MutableContext, _ struct{}) error { return nil })
)

func TestTransition(t *testing.T) {
	t.Parallel()

	t.Run("LegalTransitionMovesToDestination", func(t *testing.T) {
		l := &light{state: lightOff}
		require.True(t, transitionSwitchOn.Possible(l))
		require.NoError(t, transitionSwitchOn.Apply(l, nil, flip{}))
		require.Equal(t, lightOn, l.state)
		require.Equal(t, 1, l.switches)
	})

	t.Run("IllegalTransitionIsFailedPreconditionAndChangesNothing", func(t *testing.T) {
		l := &light{state: lightBroken, switches: 3}
		require.False(t, transitionSwitchOn.Possible(l))
		err := transitionSwitchOn.Apply(l, nil, flip{})
		var fp *serviceerror.FailedPrecondition
		require.ErrorAs(t, err, &fp)
		require.Equal(t, lightBroken, l.state)
		require.Equal(t, 3, l.switches)
	})

	t.Run("FailedApplyKeepsSourceState", func(t *testing.T) {
		l := &light{state: lightOff}
		err := transitionSwitchOn.Apply(l, nil, flip{failWith: serviceerror.NewInvalidArgument("no")})
		require.Error(t, err)
		require.Equal(t, lightOff, l.state)
	})

	t.Run("ManySources", func(t *testing.T) {
		for _, from := range []lightState{lightOff, lightOn} {
			l := &light{state: from}
			require.NoError(t, transitionBreak.Apply(l, nil, struct{}{}))
			require.Equal(t, lightBroken, l.state)
		}
	})
}
