package persistencetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/vigilhq/vigil/common/visibility"
	"github.com/vigilhq/vigil/persistence"
)

var visibilityCases = []struct {
	name string
	run  func(t *testing.T, b *bundle)
}{
	{"VisibilityFiltersByCustomAttributes", testVisibilityFiltersByCustomAttributes},
	{"VisibilityFiltersBySystemColumns", testVisibilityFiltersBySystemColumns},
	{"VisibilityOrderPagesWithoutGapsOrRepeats", testVisibilityOrderPagesWithoutGapsOrRepeats},
	{"VisibilityCountsByStatus", testVisibilityCountsByStatus},
	{"VisibilityFollowsUpdatesAndDeletes", testVisibilityFollowsUpdatesAndDeletes},
	{"VisibilityBackfillsOlderExecutions", testVisibilityBackfillsOlderExecutions},
	{"VisibilityRefusesBadQueriesAndTokens", testVisibilityRefusesBadQueriesAndTokens},
}

func init() { suiteCases = append(suiteCases, visibilityCases...) }

const (
	statusRunning   = int32(enumspb.ACTIVITY_EXECUTION_STATUS_RUNNING)
	statusCompleted = int32(enumspb.ACTIVITY_EXECUTION_STATUS_COMPLETED)
	statusFailed    = int32(enumspb.ACTIVITY_EXECUTION_STATUS_FAILED)
)

// The custom attributes of the visibility fixture, with their types.
var (
	attrCustomer = visibility.Field{Attr: "CustomerId", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD}
	attrAmount   = visibility.Field{Attr: "Amount", Type: enumspb.INDEXED_VALUE_TYPE_INT}
	attrRegions  = visibility.Field{Attr: "Regions", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST}
	attrDueAt    = visibility.Field{Attr: "DueAt", Type: enumspb.INDEXED_VALUE_TYPE_DATETIME}
	attrScore    = visibility.Field{Attr: "Score", Type: enumspb.INDEXED_VALUE_TYPE_DOUBLE}
	attrVip      = visibility.Field{Attr: "Vip", Type: enumspb.INDEXED_VALUE_TYPE_BOOL}
	attrNotes    = visibility.Field{Attr: "Notes", Type: enumspb.INDEXED_VALUE_TYPE_TEXT}
)

const visibilityFixtureSize = 30

// visibilityRecord is fixture execution i's record: a third on task queue q-b, every fourth
// completed, Amount missing for every seventh, and so on (see the tests' expectations).
func visibilityRecord(i int) *visibility.Record {
	r := &visibility.Record{
		TypeName:  []string{"Charge", "Refund"}[i%2],
		TaskQueue: "q-a",
		Status:    statusRunning,
		StartTime: baseTime.Add(time.Duration(i) * time.Second),
	}
	// Every fifth was started with a delay of i minutes.
	r.ExecutionTime = r.StartTime
	if i%5 == 4 {
		r.ExecutionTime = r.StartTime.Add(time.Duration(i) * time.Minute)
	}
	if i%3 == 2 {
		r.TaskQueue = "q-b"
	}
	if i%4 == 3 {
		r.Status = statusCompleted
		r.CloseTime = r.StartTime.Add(time.Duration(i) * time.Minute)
	}
	r.Attributes = append(r.Attributes, visibility.Attribute{Name: "CustomerId", Type: attrCustomer.Type, Str: fmt.Sprintf("c-%d", i%5)})
	if i%7 != 0 {
		r.Attributes = append(r.Attributes, visibility.Attribute{Name: "Amount", Type: attrAmount.Type, Int: int64(i * 10)})
	}
	regions := []string{"apac"}
	if i%2 == 0 {
		regions = []string{"eu", "us"}
	}
	r.Attributes = append(r.Attributes,
		visibility.Attribute{Name: "Regions", Type: attrRegions.Type, List: regions},
		visibility.Attribute{Name: "DueAt", Type: attrDueAt.Type, Str: visibility.DatetimeString(dueAt(i))},
		visibility.Attribute{Name: "Score", Type: attrScore.Type, Double: float64(i) / 4},
		visibility.Attribute{Name: "Vip", Type: attrVip.Type, Int: int64(boolInt(i%3 == 0))})
	if i%4 == 0 {
		r.Attributes = append(r.Attributes, visibility.Attribute{Name: "Notes", Type: attrNotes.Type,
			Str: fmt.Sprintf("Urgent order %d", i), List: visibility.Words(fmt.Sprintf("Urgent order %d", i))})
	}
	slices.SortFunc(r.Attributes, func(a, b visibility.Attribute) int { return cmp.Compare(a.Name, b.Name) })
	return r
}

func dueAt(i int) time.Time { return baseTime.Add(time.Duration(visibilityFixtureSize-i) * time.Hour) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func fixtureID(i int) string { return fmt.Sprintf("act-%02d", i) }

// writeVisibilityFixture creates the fixture's executions, each with its record.
func (b *bundle) writeVisibilityFixture() {
	b.t.Helper()
	var writes []*persistence.ExecutionWrite
	for i := range visibilityFixtureSize {
		w := b.create(key(fixtureID(i), "r"))
		w.Visibility = visibilityRecord(i)
		writes = append(writes, w)
	}
	b.mustWrite(writes...)
}

// visList pages through a visibility query with pageSize and returns the business IDs in
// the order listed, failing on a repeat.
func (b *bundle) visList(q *visibility.Query, pageSize int) []string {
	b.t.Helper()
	var ids []string
	var token []byte
	for range 1000 {
		resp, err := b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
			NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: q, PageSize: pageSize, NextPageToken: token})
		require.NoError(b.t, err)
		require.LessOrEqual(b.t, len(resp.Executions), pageSize)
		for _, e := range resp.Executions {
			require.NotContains(b.t, ids, e.Key.BusinessID, "listed twice")
			require.Equal(b.t, "state-1 of "+e.Key.BusinessID, string(e.State[:len("state-1 of ")+len(e.Key.BusinessID)]))
			ids = append(ids, e.Key.BusinessID)
		}
		if token = resp.NextPageToken; token == nil {
			return ids
		}
		require.NotEmpty(b.t, resp.Executions, "a token after an empty page")
	}
	b.t.Fatal("visibility listing does not end")
	return nil
}

func where(e *visibility.Expr) *visibility.Query { return &visibility.Query{Where: e} }

func pred(op visibility.Op, f visibility.Field, values ...visibility.Value) *visibility.Expr {
	return &visibility.Expr{Op: op, Field: f, Values: values}
}

func cmpE(f visibility.Field, c string, v visibility.Value) *visibility.Expr {
	return &visibility.Expr{Op: visibility.OpCompare, Cmp: c, Field: f, Values: []visibility.Value{v}}
}

func not(e *visibility.Expr) *visibility.Expr { e.Not = true; return e }

func and(args ...*visibility.Expr) *visibility.Expr {
	return &visibility.Expr{Op: visibility.OpAnd, Args: args}
}

func or(args ...*visibility.Expr) *visibility.Expr {
	return &visibility.Expr{Op: visibility.OpOr, Args: args}
}

func str(s string) visibility.Value            { return visibility.Value{S: s} }
func num(i int64) visibility.Value             { return visibility.Value{I: i} }
func tm(t time.Time) visibility.Value          { return visibility.Value{I: visibility.BoundNanos(t)} }
func dt(t time.Time) visibility.Value          { return visibility.Value{S: visibility.DatetimeString(t)} }
func col(c visibility.Column) visibility.Field { return visibility.Field{Column: c} }

// fixtureWhere is the IDs of the fixture executions that satisfy keep, in key order.
func fixtureWhere(keep func(i int) bool) []string {
	var ids []string
	for i := range visibilityFixtureSize {
		if keep(i) {
			ids = append(ids, fixtureID(i))
		}
	}
	return ids
}

func testVisibilityFiltersByCustomAttributes(t *testing.T, b *bundle) {
	b.writeVisibilityFixture()
	for _, tc := range []struct {
		name string
		q    *visibility.Expr
		want func(i int) bool
	}{
		{"keyword =", cmpE(attrCustomer, "=", str("c-2")), func(i int) bool { return i%5 == 2 }},
		{"keyword !=", cmpE(attrCustomer, "!=", str("c-2")), func(i int) bool { return i%5 != 2 }},
		{"keyword IN", pred(visibility.OpIn, attrCustomer, str("c-1"), str("c-3")), func(i int) bool { return i%5 == 1 || i%5 == 3 }},
		{"keyword NOT IN", not(pred(visibility.OpIn, attrCustomer, str("c-1"), str("c-3"))), func(i int) bool { return i%5 != 1 && i%5 != 3 }},
		{"keyword STARTS_WITH", pred(visibility.OpPrefix, attrCustomer, str("c-")), func(int) bool { return true }},
		{"keyword NOT STARTS_WITH", not(pred(visibility.OpPrefix, attrCustomer, str("c-4"))), func(i int) bool { return i%5 != 4 }},
		{"int range", and(cmpE(attrAmount, ">", num(100)), cmpE(attrAmount, "<=", num(200))),
			func(i int) bool { return i > 10 && i <= 20 && i%7 != 0 }},
		{"int BETWEEN", pred(visibility.OpBetween, attrAmount, num(50), num(90)), func(i int) bool { return i >= 5 && i <= 9 && i%7 != 0 }},
		{"int NOT BETWEEN skips the missing", not(pred(visibility.OpBetween, attrAmount, num(50), num(290))),
			func(i int) bool { return (i < 5) && i%7 != 0 }},
		{"int != skips the missing", cmpE(attrAmount, "!=", num(10)), func(i int) bool { return i != 1 && i%7 != 0 }},
		{"int IS NULL", pred(visibility.OpNull, attrAmount), func(i int) bool { return i%7 == 0 }},
		{"int IS NOT NULL", not(pred(visibility.OpNull, attrAmount)), func(i int) bool { return i%7 != 0 }},
		{"int IN", pred(visibility.OpIn, attrAmount, num(30), num(70), num(5)), func(i int) bool { return i == 3 }},
		{"datetime >=", cmpE(attrDueAt, ">=", dt(dueAt(5))), func(i int) bool { return i <= 5 }},
		{"datetime BETWEEN", pred(visibility.OpBetween, attrDueAt, dt(dueAt(12)), dt(dueAt(10))),
			func(i int) bool { return i >= 10 && i <= 12 }},
		{"keyword list holds", pred(visibility.OpContains, attrRegions, str("eu")), func(i int) bool { return i%2 == 0 }},
		{"keyword list holds one of", pred(visibility.OpContains, attrRegions, str("us"), str("apac")), func(int) bool { return true }},
		{"keyword list holds none of", not(pred(visibility.OpContains, attrRegions, str("eu"))), func(i int) bool { return i%2 == 1 }},
		{"double <", cmpE(attrScore, "<", visibility.Value{F: 1.5}), func(i int) bool { return i < 6 }},
		{"bool", cmpE(attrVip, "=", num(1)), func(i int) bool { return i%3 == 0 }},
		{"text words", pred(visibility.OpWords, attrNotes, str("urgent"), str("order")), func(i int) bool { return i%4 == 0 }},
		{"text words, one missing", pred(visibility.OpWords, attrNotes, str("urgent"), str("8")), func(i int) bool { return i == 8 }},
		{"text lacks a word", not(pred(visibility.OpWords, attrNotes, str("8"))), func(i int) bool { return i%4 == 0 && i != 8 }},
		{"text IS NULL", pred(visibility.OpNull, attrNotes), func(i int) bool { return i%4 != 0 }},
		{"AND, OR and parentheses", and(or(cmpE(col(visibility.ColumnTaskQueue), "=", str("q-b")), cmpE(attrCustomer, "=", str("c-0"))),
			pred(visibility.OpIn, col(visibility.ColumnStatus), num(int64(statusRunning)))),
			func(i int) bool { return (i%3 == 2 || i%5 == 0) && i%4 != 3 }},
		{"an attribute of another type matches nothing",
			cmpE(visibility.Field{Attr: "CustomerId", Type: enumspb.INDEXED_VALUE_TYPE_INT}, "!=", num(0)), func(int) bool { return false }},
		{"an unknown attribute is NULL", pred(visibility.OpNull, visibility.Field{Attr: "Nope", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD}),
			func(int) bool { return true }},
	} {
		require.Equal(t, fixtureWhere(tc.want), b.visList(where(tc.q), 7), tc.name)
	}
}

func testVisibilityFiltersBySystemColumns(t *testing.T, b *bundle) {
	b.writeVisibilityFixture()
	for _, tc := range []struct {
		name string
		q    *visibility.Expr
		want func(i int) bool
	}{
		{"task queue", cmpE(col(visibility.ColumnTaskQueue), "=", str("q-b")), func(i int) bool { return i%3 == 2 }},
		{"type", cmpE(col(visibility.ColumnTypeName), "!=", str("Charge")), func(i int) bool { return i%2 == 1 }},
		{"business ID prefix", pred(visibility.OpPrefix, col(visibility.ColumnBusinessID), str("act-1")),
			func(i int) bool { return i >= 10 && i < 20 }},
		{"closed status", pred(visibility.OpIn, col(visibility.ColumnStatus), num(int64(statusCompleted))), func(i int) bool { return i%4 == 3 }},
		{"start time BETWEEN", pred(visibility.OpBetween, col(visibility.ColumnStartTime), tm(baseTime.Add(3*time.Second)), tm(baseTime.Add(5*time.Second))),
			func(i int) bool { return i >= 3 && i <= 5 }},
		{"close time after, running ones excluded", cmpE(col(visibility.ColumnCloseTime), ">", tm(baseTime)), func(i int) bool { return i%4 == 3 }},
		{"close time IS NULL", pred(visibility.OpNull, col(visibility.ColumnCloseTime)), func(i int) bool { return i%4 != 3 }},
		{"close time NOT BETWEEN, running ones excluded",
			not(pred(visibility.OpBetween, col(visibility.ColumnCloseTime), tm(baseTime), tm(baseTime.Add(10*time.Minute)))),
			func(i int) bool {
				return i%4 == 3 && time.Duration(i)*time.Second+time.Duration(i)*time.Minute > 10*time.Minute
			}},
		{"execution time after, delayed ones only", cmpE(col(visibility.ColumnExecutionTime), ">", tm(baseTime.Add(time.Minute))),
			func(i int) bool { return i%5 == 4 }},
		{"duration", cmpE(col(visibility.ColumnDuration), ">=", num(int64(15*time.Minute))), func(i int) bool { return i%4 == 3 && i >= 15 }},
		{"far-away time literals", cmpE(col(visibility.ColumnStartTime), ">", tm(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC))), func(int) bool { return true }},
		{"worker empty", pred(visibility.OpNull, col(visibility.ColumnWorkerInstanceKey)), func(int) bool { return true }},
	} {
		require.Equal(t, fixtureWhere(tc.want), b.visList(where(tc.q), 4), tc.name)
	}
}

func testVisibilityOrderPagesWithoutGapsOrRepeats(t *testing.T, b *bundle) {
	b.writeVisibilityFixture()
	ids := func(is ...int) []string {
		out := make([]string, len(is))
		for j, i := range is {
			out[j] = fixtureID(i)
		}
		return out
	}
	sorted := func(less func(a, b int) int) []string {
		is := make([]int, visibilityFixtureSize)
		for i := range is {
			is[i] = i
		}
		slices.SortStableFunc(is, less)
		return ids(is...)
	}
	amountNull := func(i int) bool { return i%7 == 0 }
	for _, tc := range []struct {
		name string
		q    *visibility.Query
		want []string
	}{
		{"start time descending", &visibility.Query{OrderBy: []visibility.Order{{Field: col(visibility.ColumnStartTime), Desc: true}}},
			sorted(func(a, b int) int { return cmp.Compare(b, a) })},
		{"close time ascending: unknown last, ties by key",
			&visibility.Query{OrderBy: []visibility.Order{{Field: col(visibility.ColumnCloseTime)}}},
			sorted(func(a, b int) int {
				ca, cb := a%4 == 3, b%4 == 3
				if ca != cb {
					return -cmp.Compare(boolInt(ca), boolInt(cb))
				}
				return cmp.Compare(a, b)
			})},
		{"custom int descending: missing first, ties descending",
			&visibility.Query{OrderBy: []visibility.Order{{Field: attrAmount, Desc: true}}},
			sorted(func(a, b int) int {
				if amountNull(a) != amountNull(b) {
					return -cmp.Compare(boolInt(amountNull(a)), boolInt(amountNull(b)))
				}
				return cmp.Compare(b, a)
			})},
		{"custom keyword ascending, then start time descending (mixed directions)",
			&visibility.Query{OrderBy: []visibility.Order{{Field: attrCustomer}, {Field: col(visibility.ColumnStartTime), Desc: true}}},
			sorted(func(a, b int) int { return cmp.Or(cmp.Compare(a%5, b%5), cmp.Compare(b, a)) })},
		{"filtered and ordered by a datetime",
			&visibility.Query{Where: cmpE(col(visibility.ColumnTaskQueue), "=", str("q-a")), OrderBy: []visibility.Order{{Field: attrDueAt}}},
			func() []string {
				var out []string
				for i := visibilityFixtureSize - 1; i >= 0; i-- {
					if i%3 != 2 {
						out = append(out, fixtureID(i))
					}
				}
				return out
			}()},
		{"custom double descending, every execution has it",
			&visibility.Query{OrderBy: []visibility.Order{{Field: attrScore, Desc: true}}},
			sorted(func(a, b int) int { return cmp.Compare(b, a) })},
		{"custom int ascending, missing last",
			&visibility.Query{OrderBy: []visibility.Order{{Field: attrAmount}}},
			sorted(func(a, b int) int {
				if amountNull(a) != amountNull(b) {
					return cmp.Compare(boolInt(amountNull(a)), boolInt(amountNull(b)))
				}
				return cmp.Compare(a, b)
			})},
		{"status then double", &visibility.Query{OrderBy: []visibility.Order{{Field: col(visibility.ColumnStatus)}, {Field: attrScore, Desc: true}}},
			sorted(func(a, b int) int {
				return cmp.Or(cmp.Compare(boolInt(a%4 == 3), boolInt(b%4 == 3)), cmp.Compare(b, a))
			})},
	} {
		for _, pageSize := range []int{1, 4, 30, 100} {
			require.Equal(t, tc.want, b.visList(tc.q, pageSize), "%s, pages of %d", tc.name, pageSize)
		}
	}

	// An execution created between two pages, before the position of the first, shows on
	// no later page; every execution listed before stays where it was.
	q := &visibility.Query{OrderBy: []visibility.Order{{Field: col(visibility.ColumnStartTime)}}}
	first, err := b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: q, PageSize: 10})
	require.NoError(t, err)
	w := b.create(key("act-early", "r"))
	w.Visibility = &visibility.Record{TypeName: "Charge", TaskQueue: "q-a", Status: statusRunning, StartTime: baseTime.Add(-time.Hour)}
	b.mustWrite(w)
	rest, err := b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: q, PageSize: 100, NextPageToken: first.NextPageToken})
	require.NoError(t, err)
	require.Len(t, rest.Executions, visibilityFixtureSize-10)
	require.Equal(t, fixtureID(10), rest.Executions[0].Key.BusinessID)
}

func testVisibilityCountsByStatus(t *testing.T, b *bundle) {
	b.writeVisibilityFixture()
	total, byStatus, err := b.store.CountVisibility(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: &visibility.Query{}})
	require.NoError(t, err)
	require.EqualValues(t, visibilityFixtureSize, total)
	require.Equal(t, map[int32]int64{statusRunning: 23, statusCompleted: 7}, byStatus)

	total, byStatus, err = b.store.CountVisibility(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: where(pred(visibility.OpContains, attrRegions, str("eu"))),
	})
	require.NoError(t, err)
	require.EqualValues(t, 15, total)
	require.Equal(t, map[int32]int64{statusRunning: 15}, byStatus, "every fourth is odd when completed")

	// Another namespace's executions are not counted.
	total, _, err = b.store.CountVisibility(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: "other", ArchetypeID: testArchetype, Visibility: &visibility.Query{}})
	require.NoError(t, err)
	require.Zero(t, total)
}

func testVisibilityFollowsUpdatesAndDeletes(t *testing.T, b *bundle) {
	b.writeVisibilityFixture()
	amountIs := func(v int64) *visibility.Query { return where(cmpE(attrAmount, "=", num(v))) }
	require.Equal(t, []string{fixtureID(5)}, b.visList(amountIs(50), 10))

	// An update whose attributes changed: Amount moves, Regions goes away.
	rec := visibilityRecord(5)
	rec.Attributes = slices.DeleteFunc(rec.Attributes, func(a visibility.Attribute) bool { return a.Name == "Regions" })
	for i := range rec.Attributes {
		if rec.Attributes[i].Name == "Amount" {
			rec.Attributes[i].Int = 555
		}
	}
	w := b.update(key(fixtureID(5), "r"), 1)
	w.State = []byte("state-1 of " + fixtureID(5) + " again")
	w.Visibility = rec
	b.mustWrite(w)
	require.Empty(t, b.visList(amountIs(50), 10))
	require.Equal(t, []string{fixtureID(5)}, b.visList(amountIs(555), 10))
	require.Contains(t, b.visList(where(pred(visibility.OpNull, attrRegions)), 10), fixtureID(5))
	require.NotContains(t, b.visList(where(pred(visibility.OpContains, attrRegions, str("apac"))), 10), fixtureID(5))

	// An update that keeps the attributes (a status change) and one without a record.
	rec = visibilityRecord(6)
	rec.Status, rec.CloseTime = statusFailed, rec.StartTime.Add(time.Second)
	w = b.update(key(fixtureID(6), "r"), 1)
	w.State = []byte("state-1 of " + fixtureID(6) + " again")
	w.Visibility, w.KeepVisibilityAttributes = rec, true
	untouched := b.update(key(fixtureID(8), "r"), 1)
	untouched.State = []byte("state-1 of " + fixtureID(8) + " again")
	b.mustWrite(w, untouched)
	failed := where(pred(visibility.OpIn, col(visibility.ColumnStatus), num(int64(statusFailed))))
	require.Equal(t, []string{fixtureID(6)}, b.visList(failed, 10))
	require.Equal(t, []string{fixtureID(6)}, b.visList(where(and(cmpE(attrAmount, "=", num(60)),
		cmpE(col(visibility.ColumnDuration), "=", num(int64(time.Second))))), 10))
	require.Equal(t, []string{fixtureID(8)}, b.visList(amountIs(80), 10), "a write without a record keeps the stored one")

	// A deleted execution leaves no visibility behind.
	b.mustWrite(b.del(key(fixtureID(6), "r"), 2))
	require.Empty(t, b.visList(failed, 10))
	require.Empty(t, b.visList(amountIs(60), 10))
	total, _, err := b.store.CountVisibility(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: &visibility.Query{}})
	require.NoError(t, err)
	require.EqualValues(t, visibilityFixtureSize-1, total)
}

func testVisibilityBackfillsOlderExecutions(t *testing.T, b *bundle) {
	// Executions written without a record, as before the visibility tables existed; one of
	// another archetype, and one that has a record already.
	var writes []*persistence.ExecutionWrite
	for i := range visibilityFixtureSize {
		writes = append(writes, b.create(key(fixtureID(i), "r")))
	}
	other := b.create(persistence.ExecutionKey{NamespaceID: testNamespace, ArchetypeID: testArchetype + 1, BusinessID: "w", RunID: "r"})
	writes = append(writes, other)
	b.mustWrite(writes...)
	w := b.update(key(fixtureID(0), "r"), 1)
	w.State = []byte("state-1 of " + fixtureID(0) + " newer")
	w.Visibility = &visibility.Record{TypeName: "Newer", Status: statusRunning}
	b.mustWrite(w)
	require.Equal(t, []string{fixtureID(0)}, b.visList(&visibility.Query{}, 10))

	derived := 0
	derive := func(state []byte) (*visibility.Record, error) {
		var i int
		if _, err := fmt.Sscanf(string(state), "state-1 of act-%d", &i); err != nil {
			return nil, err
		}
		derived++
		if i == 29 {
			return nil, nil // not every state has a record
		}
		return visibilityRecord(i), nil
	}
	n, err := b.store.BackfillVisibility(b.ctx, testArchetype, derive)
	require.NoError(t, err)
	require.Equal(t, visibilityFixtureSize-2, n)
	require.Equal(t, visibilityFixtureSize-1, derived, "the execution with a record is not derived again")
	require.Equal(t, fixtureWhere(func(i int) bool { return i%5 == 2 && i != 29 }), b.visList(where(cmpE(attrCustomer, "=", str("c-2"))), 3))
	require.Equal(t, []string{fixtureID(0)}, b.visList(where(cmpE(col(visibility.ColumnTypeName), "=", str("Newer"))), 3),
		"the record written meanwhile is kept")

	// Once done, it is not done again, even for executions that came later without one.
	b.mustWrite(b.create(key("act-late", "r")))
	n, err = b.store.BackfillVisibility(b.ctx, testArchetype, func([]byte) (*visibility.Record, error) {
		return nil, errors.New("must not be called")
	})
	require.NoError(t, err)
	require.Zero(t, n)

	// A state that cannot be read fails the backfill of its archetype, which is then not
	// recorded as done.
	_, err = b.store.BackfillVisibility(b.ctx, testArchetype+1, func([]byte) (*visibility.Record, error) {
		return nil, errors.New("corrupt")
	})
	require.ErrorContains(t, err, "corrupt")
	n, err = b.store.BackfillVisibility(b.ctx, testArchetype+1, func([]byte) (*visibility.Record, error) { return nil, nil })
	require.NoError(t, err)
	require.Zero(t, n)
}

func testVisibilityRefusesBadQueriesAndTokens(t *testing.T, b *bundle) {
	b.writeVisibilityFixture()
	list := func(q *visibility.Query, token []byte) error {
		_, err := b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
			NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: q, PageSize: 5, NextPageToken: token})
		return err
	}
	for name, q := range map[string]*visibility.Query{
		"unknown column":        where(cmpE(col("Nope"), "=", str("x"))),
		"unknown operator":      where(&visibility.Expr{Op: "like", Field: col(visibility.ColumnTaskQueue), Values: []visibility.Value{str("x")}}),
		"missing value":         where(&visibility.Expr{Op: visibility.OpCompare, Cmp: "=", Field: col(visibility.ColumnTaskQueue)}),
		"empty AND":             where(and()),
		"order by keyword list": {OrderBy: []visibility.Order{{Field: attrRegions}}},
		"contains on a keyword": where(pred(visibility.OpContains, attrCustomer, str("x"))),
	} {
		require.ErrorIs(t, list(q, nil), persistence.ErrInvalidListRequest, name)
	}
	q := &visibility.Query{OrderBy: []visibility.Order{{Field: attrAmount}}}
	first, err := b.store.ListExecutions(b.ctx, persistence.ListExecutionsRequest{
		NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: q, PageSize: 5})
	require.NoError(t, err)
	require.NotNil(t, first.NextPageToken)
	require.ErrorIs(t, list(q, []byte("garbage")), persistence.ErrInvalidListRequest)
	// A token of another order does not fit.
	require.ErrorIs(t, list(&visibility.Query{}, first.NextPageToken), persistence.ErrInvalidListRequest)
}

// PreVisibilityExecutions inserts, in a database at the schema before the visibility tables,
// three executions of namespace "ns" and archetype 9, whose states are a customer name;
// RequireBackfilledAfterMigration then checks that the migrated store lists them by it.
const PreVisibilityExecutions = `INSERT INTO executions
	(namespace_id, archetype_id, business_id, run_id, shard_id, db_version, lifecycle, state)
	VALUES ('ns', 9, 'a-1', 'r', 1, 1, 1, 'c-1'), ('ns', 9, 'a-2', 'r', 1, 1, 1, 'c-2'), ('ns', 9, 'a-3', 'r', 1, 1, 1, 'c-2')`

// RequireBackfilledAfterMigration checks a store opened on a database that held
// PreVisibilityExecutions before its migration: once backfilled, a query on the derived
// attribute finds them, and a second backfill does nothing.
func RequireBackfilledAfterMigration(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	derive := func(state []byte) (*visibility.Record, error) {
		return &visibility.Record{TypeName: "T", Status: statusRunning,
			Attributes: []visibility.Attribute{{Name: "Customer", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD, Str: string(state)}}}, nil
	}
	n, err := s.BackfillVisibility(ctx, 9, derive)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	resp, err := s.ListExecutions(ctx, persistence.ListExecutionsRequest{NamespaceID: "ns", ArchetypeID: 9, PageSize: 10,
		Visibility: where(cmpE(visibility.Field{Attr: "Customer", Type: enumspb.INDEXED_VALUE_TYPE_KEYWORD}, "=", str("c-2")))})
	require.NoError(t, err)
	var ids []string
	for _, e := range resp.Executions {
		ids = append(ids, e.Key.BusinessID)
		require.Equal(t, "c-2", string(e.State))
	}
	require.Equal(t, []string{"a-2", "a-3"}, ids)
	n, err = s.BackfillVisibility(ctx, 9, derive)
	require.NoError(t, err)
	require.Zero(t, n)
}

// RunVisibilityListBenchmark times one page (100) of a visibility query over 100,000
// executions: 1,000 task queues and 1,000 customers of 100 executions each, spread over the
// start times, and an Int attribute that counts them. Sub-benchmarks: filters on system
// columns and custom attributes, ORDER BY over a filter and over everything, a later page
// reached by its token, and a count.
func RunVisibilityListBenchmark(b *testing.B, open func(b *testing.B) persistence.Store) {
	const executions, chunk = 100000, 1000
	s := open(b)
	b.Cleanup(func() { _ = s.Close() })
	ctx := b.Context()
	info, err := s.AcquireShard(ctx, testShard, "host-a")
	require.NoError(b, err)
	for start := 0; start < executions; start += chunk {
		writes := make([]*persistence.ExecutionWrite, 0, chunk)
		for i := start; i < start+chunk; i++ {
			writes = append(writes, &persistence.ExecutionWrite{
				ShardID: testShard, RangeID: info.RangeID, Mode: persistence.WriteModeCreate, NextDBVersion: 1,
				Key: key(fmt.Sprintf("bench-%06d", i), "r"), State: make([]byte, 300), Lifecycle: persistence.LifecycleRunning,
				Visibility: &visibility.Record{TypeName: "Charge", TaskQueue: fmt.Sprintf("q-%d", i%1000), Status: statusRunning,
					StartTime: baseTime.Add(time.Duration(i) * time.Second), Attributes: []visibility.Attribute{
						{Name: "Amount", Type: attrAmount.Type, Int: int64(i)},
						{Name: "CustomerId", Type: attrCustomer.Type, Str: fmt.Sprintf("c-%d", i%1000)},
					}},
			})
		}
		results, err := s.WriteBatch(ctx, writes)
		require.NoError(b, err)
		for _, err := range results {
			require.NoError(b, err)
		}
	}
	// A backend whose planner needs statistics gets them, as it would in service (PostgreSQL's
	// autovacuum analyzes a table that grew).
	if a, ok := s.(interface{ AnalyzeVisibility(context.Context) error }); ok {
		require.NoError(b, a.AnalyzeVisibility(ctx))
	}
	startDesc := []visibility.Order{{Field: col(visibility.ColumnStartTime), Desc: true}}
	for _, bc := range []struct {
		name       string
		q          *visibility.Query
		secondPage bool
	}{
		{"TaskQueue", where(cmpE(col(visibility.ColumnTaskQueue), "=", str("q-7"))), false},
		{"All", &visibility.Query{}, false},
		{"CustomIntRange", where(cmpE(attrAmount, ">=", num(99950))), false},
		{"CustomKeywordOrderByStartTime", &visibility.Query{Where: cmpE(attrCustomer, "=", str("c-7")), OrderBy: startDesc}, false},
		{"CustomRangeOrderByStartTime", &visibility.Query{Where: cmpE(attrAmount, ">=", num(50000)), OrderBy: startDesc}, false},
		{"CustomRangeOrderByStartTimeSecondPage", &visibility.Query{Where: cmpE(attrAmount, ">=", num(50000)), OrderBy: startDesc}, true},
		{"OrderByCustomInTaskQueue", &visibility.Query{Where: cmpE(col(visibility.ColumnTaskQueue), "=", str("q-7")),
			OrderBy: []visibility.Order{{Field: attrAmount, Desc: true}}}, false},
		{"OrderByCustomWholeNamespace", &visibility.Query{OrderBy: []visibility.Order{{Field: attrAmount, Desc: true}}}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := persistence.ListExecutionsRequest{NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: bc.q, PageSize: 100}
			if bc.secondPage {
				resp, err := s.ListExecutions(ctx, req)
				require.NoError(b, err)
				req.NextPageToken = resp.NextPageToken
			}
			for b.Loop() {
				resp, err := s.ListExecutions(ctx, req)
				require.NoError(b, err)
				require.NotEmpty(b, resp.Executions)
			}
		})
	}
	b.Run("CountCustomKeyword", func(b *testing.B) {
		for b.Loop() {
			total, _, err := s.CountVisibility(ctx, persistence.ListExecutionsRequest{
				NamespaceID: testNamespace, ArchetypeID: testArchetype, Visibility: where(cmpE(attrCustomer, "=", str("c-7")))})
			require.NoError(b, err)
			require.EqualValues(b, 100, total)
		}
	})
}
