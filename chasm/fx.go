package chasm

import "go.uber.org/fx"

// LibraryGroup is the fx value group libraries join to be registered.
const LibraryGroup = "chasm.libraries"

// Module builds the Registry from every Library in the LibraryGroup group. A library plugs
// in with its own module:
//
//	fx.Module("worker", fx.Provide(chasm.AsLibrary(NewLibrary)))
var Module = fx.Module("chasm", fx.Provide(newRegistryFromGroup))

type registryParams struct {
	fx.In
	Libraries []Library `group:"chasm.libraries"`
}

func newRegistryFromGroup(p registryParams) (*Registry, error) {
	r := NewRegistry()
	for _, lib := range p.Libraries {
		if err := r.Register(lib); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// AsLibrary annotates a constructor of a Library so fx adds its result to LibraryGroup.
func AsLibrary(constructor any) any {
	return fx.Annotate(constructor, fx.As(new(Library)), fx.ResultTags(`group:"`+LibraryGroup+`"`))
}
