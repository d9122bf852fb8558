package chasm

import "context"

type engineContextKey struct{}

// NewEngineContext returns ctx carrying e. Engines wrap the context they pass to side-effect
// executors this way, so that an executor can re-enter the engine that runs it without the
// library holding a reference to an engine that is built after it.
func NewEngineContext(ctx context.Context, e Engine) context.Context {
	return context.WithValue(ctx, engineContextKey{}, e)
}

// EngineFromContext returns the engine carried by ctx, or nil.
func EngineFromContext(ctx context.Context) Engine {
	e, _ := ctx.Value(engineContextKey{}).(Engine)
	return e
}
