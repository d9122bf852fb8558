// Package searchattr is the frontend's knowledge of search attributes: which names are the
// system's, which a user may register and with which types (OperatorService), and how the
// values a client sends with a start request are checked against a namespace's registered
// attributes and decoded for queries.
//
// Values travel as Temporal's SDKs encode them: one JSON payload per attribute, its type in the
// payload's "type" metadata. The registered type decides how a value is read, as in Temporal;
// a stored value is stamped with that type so that every SDK decodes it back.
package searchattr

import (
	"maps"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/vigilhq/vigil/common/visibility"
)

// Limits, Temporal's defaults.
const (
	// MaxNameLength bounds a custom search attribute's name.
	MaxNameLength = 255
	// MaxCustomPerNamespace bounds the custom search attributes of one namespace.
	MaxCustomPerNamespace = 100
	// MaxKeys bounds the search attributes of one execution.
	MaxKeys = 100
	// MaxValueSize bounds one attribute's encoded value, in bytes.
	MaxValueSize = 2 * 1024
	// MaxTotalSize bounds the encoded values of one execution's attributes together.
	MaxTotalSize = 40 * 1024
	// MaxSummarySize bounds user metadata's summary payload, in bytes.
	MaxSummarySize = 400
	// MaxDetailsSize bounds user metadata's details payload, in bytes.
	MaxDetailsSize = 20000
)

// reservedPrefix starts every name Temporal keeps for itself.
const reservedPrefix = "Temporal"

// activitySystem are the system search attributes of standalone activities: what a query of
// ListActivityExecutions and CountActivityExecutions can name besides the custom ones.
var activitySystem = map[string]enumspb.IndexedValueType{
	"ActivityId":        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"RunId":             enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"ActivityType":      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"TaskQueue":         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"ExecutionStatus":   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"StartTime":         enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"CloseTime":         enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"ExecutionTime":     enumspb.INDEXED_VALUE_TYPE_DATETIME,
	"ExecutionDuration": enumspb.INDEXED_VALUE_TYPE_INT,
	"WorkerInstanceKey": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// temporalSystem are Temporal's other system and predefined names (workflows', schedules',
// deployments'): vigil does not fill them, but a Temporal user cannot register them either,
// and tools moving between the two servers must not find them taken.
var temporalSystem = []string{
	"NamespaceId", "WorkflowId", "WorkflowType", "HistoryLength", "HistorySizeBytes",
	"StateTransitionCount", "ParentWorkflowId", "ParentRunId", "RootWorkflowId", "RootRunId",
	"BinaryChecksums", "BuildIds", "BatcherNamespace", "BatcherUser", "Status",
}

// System returns the system search attributes vigil fills (a copy).
func System() map[string]enumspb.IndexedValueType { return maps.Clone(activitySystem) }

// IsReserved reports whether name is the system's, in any case: vigil's queries read column
// names case-insensitively, so "activityid" would shadow ActivityId.
func IsReserved(name string) bool {
	if len(name) >= len(reservedPrefix) && strings.EqualFold(name[:len(reservedPrefix)], reservedPrefix) {
		return true
	}
	for sys := range activitySystem {
		if strings.EqualFold(sys, name) {
			return true
		}
	}
	return slices.ContainsFunc(temporalSystem, func(s string) bool { return strings.EqualFold(s, name) })
}

// ValidateName checks a name a user wants to register: InvalidArgument unless it is a query
// identifier (a letter or underscore, then letters, digits and underscores), at most
// MaxNameLength bytes, and not reserved.
func ValidateName(name string) error {
	switch {
	case name == "":
		return serviceerror.NewInvalidArgument("search attribute name is empty")
	case len(name) > MaxNameLength:
		return serviceerror.NewInvalidArgumentf("search attribute name %.40q... is longer than %d bytes", name, MaxNameLength)
	case IsReserved(name):
		return serviceerror.NewInvalidArgumentf("search attribute %s is reserved by system", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return serviceerror.NewInvalidArgumentf(
				"search attribute name %q is not valid: it must start with a letter or '_' and hold only letters, digits and '_'", name)
		}
	}
	return nil
}

// ValidateType checks a type a user wants to register: InvalidArgument for UNSPECIFIED or a
// value the enum does not define.
func ValidateType(name string, t enumspb.IndexedValueType) error {
	if _, ok := enumspb.IndexedValueType_name[int32(t)]; !ok || t == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
		return serviceerror.NewInvalidArgumentf(
			"search attribute %s: unknown type %d (use Keyword, Text, Int, Double, Bool, Datetime or KeywordList)", name, int32(t))
	}
	return nil
}

// Lookup returns the registered name and type that name denotes, compared
// case-insensitively as queries do.
func Lookup(registered map[string]enumspb.IndexedValueType, name string) (string, enumspb.IndexedValueType, bool) {
	if t, ok := registered[name]; ok {
		return name, t, true
	}
	for n, t := range registered {
		if strings.EqualFold(n, name) {
			return n, t, true
		}
	}
	return "", enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED, false
}

// Validate checks the search attributes of a start request against the namespace's
// registered ones and returns what is to be stored: every value re-stamped with its registered
// type (metadata "type"), null values (which mean "unset") left out, nil when nothing is left.
// Errors are InvalidArgument, as Temporal words them: an unknown name, a system name, a value
// that does not decode as its type, or a limit exceeded.
func Validate(sa *commonpb.SearchAttributes, registered map[string]enumspb.IndexedValueType) (*commonpb.SearchAttributes, error) {
	fields := sa.GetIndexedFields()
	if len(fields) == 0 {
		return nil, nil
	}
	if len(fields) > MaxKeys {
		return nil, serviceerror.NewInvalidArgumentf("number of search attributes %d exceeds limit %d", len(fields), MaxKeys)
	}
	names := slices.Sorted(maps.Keys(fields)) // the same error for the same request
	out := make(map[string]*commonpb.Payload, len(fields))
	total := 0
	for _, name := range names {
		p := fields[name]
		if IsReserved(name) {
			if _, _, ok := Lookup(activitySystem, name); ok {
				return nil, serviceerror.NewInvalidArgumentf("%s attribute can't be set in SearchAttributes", name)
			}
		}
		t, ok := registered[name]
		if !ok {
			return nil, serviceerror.NewInvalidArgumentf("search attribute %s is not defined", name)
		}
		size := len(p.GetData())
		if size > MaxValueSize {
			return nil, serviceerror.NewInvalidArgumentf("search attribute %s value size %d exceeds size limit %d", name, size, MaxValueSize)
		}
		total += size + len(name)
		v, err := Decode(p, t)
		if err != nil {
			return nil, serviceerror.NewInvalidArgumentf("invalid value for search attribute %s of type %s: %v", name, t, err)
		}
		if v == nil {
			continue
		}
		out[name] = &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte("json/plain"), "type": []byte(t.String())},
			Data:     p.GetData(),
		}
	}
	if total > MaxTotalSize {
		return nil, serviceerror.NewInvalidArgumentf("total size of search attributes %d exceeds size limit %d", total, MaxTotalSize)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return &commonpb.SearchAttributes{IndexedFields: out}, nil
}

// Decode reads a value of type t: a string (Keyword, Text), []string (KeywordList), int64
// (Int), float64 (Double), bool (Bool) or time.Time (Datetime). A null value (no data, the
// binary/null encoding, or JSON null) is nil without an error.
func Decode(p *commonpb.Payload, t enumspb.IndexedValueType) (any, error) {
	return visibility.DecodeValue(p, t)
}

// ValidateUserMetadata checks a start request's user metadata against Temporal's size limits
// (InvalidArgument beyond them).
func ValidateUserMetadata(m *sdkpb.UserMetadata) error {
	if n := len(m.GetSummary().GetData()); n > MaxSummarySize {
		return serviceerror.NewInvalidArgumentf("user_metadata.summary is %d bytes, over the limit of %d", n, MaxSummarySize)
	}
	if n := len(m.GetDetails().GetData()); n > MaxDetailsSize {
		return serviceerror.NewInvalidArgumentf("user_metadata.details is %d bytes, over the limit of %d", n, MaxDetailsSize)
	}
	return nil
}
