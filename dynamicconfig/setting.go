package dynamicconfig

import (
	"sync"
	"time"
)

// GlobalSetting is a setting with one value for the whole cluster. Declare it at package level
// with one of the NewGlobal*Setting constructors.
type GlobalSetting[T any] struct {
	key         Key
	def         T
	description string
	convert     func(any) (T, error)
}

// NamespaceSetting is a setting whose value may differ per namespace. Declare it at package level
// with one of the NewNamespace*Setting constructors.
type NamespaceSetting[T any] struct {
	key         Key
	def         T
	description string
	convert     func(any) (T, error)
}

// Key returns the setting's key.
func (s GlobalSetting[T]) Key() Key { return s.key }

// Default returns the value used when none is configured or the configured one is invalid.
func (s GlobalSetting[T]) Default() T { return s.def }

// Description says what the setting controls.
func (s GlobalSetting[T]) Description() string { return s.description }

// Get returns a getter for the setting. Call the getter each time the value is needed (not once
// at startup): that is what lets a config change apply without a restart.
func (s GlobalSetting[T]) Get(c *Collection) func() T {
	return func() T { return get(c, s.key, "", s.def, s.convert) }
}

// Key returns the setting's key.
func (s NamespaceSetting[T]) Key() Key { return s.key }

// Default returns the value used when none is configured or the configured one is invalid.
func (s NamespaceSetting[T]) Default() T { return s.def }

// Description says what the setting controls.
func (s NamespaceSetting[T]) Description() string { return s.description }

// Get returns a getter for the setting. The getter takes the namespace NAME, because constraints
// in config files are written with names: passing a namespace ID compiles but silently never
// matches an override. Call the getter each time the value is needed.
func (s NamespaceSetting[T]) Get(c *Collection) func(namespace string) T {
	return func(namespace string) T { return get(c, s.key, namespace, s.def, s.convert) }
}

// Readable names for the instantiations.
type (
	GlobalIntSetting         = GlobalSetting[int]
	GlobalFloatSetting       = GlobalSetting[float64]
	GlobalBoolSetting        = GlobalSetting[bool]
	GlobalStringSetting      = GlobalSetting[string]
	GlobalDurationSetting    = GlobalSetting[time.Duration]
	NamespaceIntSetting      = NamespaceSetting[int]
	NamespaceFloatSetting    = NamespaceSetting[float64]
	NamespaceBoolSetting     = NamespaceSetting[bool]
	NamespaceStringSetting   = NamespaceSetting[string]
	NamespaceDurationSetting = NamespaceSetting[time.Duration]
)

// NewGlobalIntSetting declares a cluster-wide int setting.
func NewGlobalIntSetting(key Key, def int, description string) GlobalIntSetting {
	return newGlobal(key, def, description, convertInt)
}

// NewGlobalFloatSetting declares a cluster-wide float setting.
func NewGlobalFloatSetting(key Key, def float64, description string) GlobalFloatSetting {
	return newGlobal(key, def, description, convertFloat)
}

// NewGlobalBoolSetting declares a cluster-wide bool setting.
func NewGlobalBoolSetting(key Key, def bool, description string) GlobalBoolSetting {
	return newGlobal(key, def, description, convertBool)
}

// NewGlobalStringSetting declares a cluster-wide string setting.
func NewGlobalStringSetting(key Key, def string, description string) GlobalStringSetting {
	return newGlobal(key, def, description, convertString)
}

// NewGlobalDurationSetting declares a cluster-wide duration setting.
func NewGlobalDurationSetting(key Key, def time.Duration, description string) GlobalDurationSetting {
	return newGlobal(key, def, description, convertDuration)
}

// NewNamespaceIntSetting declares an int setting that may be overridden per namespace.
func NewNamespaceIntSetting(key Key, def int, description string) NamespaceIntSetting {
	return newNamespace(key, def, description, convertInt)
}

// NewNamespaceFloatSetting declares a float setting that may be overridden per namespace.
func NewNamespaceFloatSetting(key Key, def float64, description string) NamespaceFloatSetting {
	return newNamespace(key, def, description, convertFloat)
}

// NewNamespaceBoolSetting declares a bool setting that may be overridden per namespace.
func NewNamespaceBoolSetting(key Key, def bool, description string) NamespaceBoolSetting {
	return newNamespace(key, def, description, convertBool)
}

// NewNamespaceStringSetting declares a string setting that may be overridden per namespace.
func NewNamespaceStringSetting(key Key, def string, description string) NamespaceStringSetting {
	return newNamespace(key, def, description, convertString)
}

// NewNamespaceDurationSetting declares a duration setting that may be overridden per namespace.
func NewNamespaceDurationSetting(key Key, def time.Duration, description string) NamespaceDurationSetting {
	return newNamespace(key, def, description, convertDuration)
}

func newGlobal[T any](key Key, def T, description string, convert func(any) (T, error)) GlobalSetting[T] {
	registerKey(key, validatorOf(convert))
	registerDoc(key, "global", def, description)
	return GlobalSetting[T]{key: key, def: def, description: description, convert: convert}
}

func newNamespace[T any](key Key, def T, description string, convert func(any) (T, error)) NamespaceSetting[T] {
	registerKey(key, validatorOf(convert))
	registerDoc(key, "namespace", def, description)
	return NamespaceSetting[T]{key: key, def: def, description: description, convert: convert}
}

// declaredKeys records every declared key so that clients can point out keys that no setting
// reads (usually typos). Declaring a key twice is allowed: tests may declare their own settings.
var declaredKeys sync.Map // normalized key -> Key

// declaredValidators holds, for every declared key, a check that a value converts to the
// setting's type: files are checked with it when they are loaded, so that a value of the
// wrong type is refused then, not silently replaced by the default at first use.
var declaredValidators sync.Map // normalized key -> func(any) error

func registerKey(key Key, validate func(any) error) {
	declaredKeys.Store(key.normalized(), key)
	declaredValidators.Store(key.normalized(), validate)
}

func validatorOf[T any](convert func(any) (T, error)) func(any) error {
	return func(v any) error {
		_, err := convert(v)
		return err
	}
}

// ValidateValue checks that value is of the type the setting declared with key expects (a
// duration for a duration setting, and so on). Keys no setting declares are not checked.
func ValidateValue(key Key, value any) error {
	validate, ok := declaredValidators.Load(key.normalized())
	if !ok {
		return nil
	}
	return validate.(func(any) error)(value)
}

// IsDeclared reports whether some setting with this key (compared case-insensitively) has been
// declared in the running binary.
func IsDeclared(key Key) bool {
	_, ok := declaredKeys.Load(key.normalized())
	return ok
}
