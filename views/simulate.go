package views

// SimulateView is the policy simulator: the form to pick a range (or a
// file of events) and proposals, and the results once run.
type SimulateView struct {
	AdminPage
	// Source is "stored" or "upload".
	Source   string
	From, To string // datetime-local values, UTC
	// Errors maps a field's form name to its message, shown next to it.
	Errors    map[string]string
	Proposals []ProposalForm
	Result    *SimulationResult
	// Locales are the languages the results can name types and show
	// their headings in.
	Locales []Option
}

// ProposalForm is one proposal's part of the form.
type ProposalForm struct {
	// Prefix starts the names of the proposal's fields ("a").
	Prefix   string
	Label    string
	Name     string
	Everyone []Option
	DailyAt  string
	WeeklyOn []Option
	WeeklyAt string
	Types    []ProposalTypeRow
	// Budget is the proposed installation-wide daily email budget.
	Budget string
}

// Field is the form name of one of the proposal's own fields
// ("a.everyone.mode").
func (p ProposalForm) Field(name string) string { return p.Prefix + "." + name }

// TypeField is the form name of a type's field ("a.types.comment.window").
func (p ProposalForm) TypeField(key, name string) string {
	return p.Prefix + ".types." + key + "." + name
}

// ProposalTypeRow is one type's row of a proposal: what it is now and
// what to try instead (empty: unchanged).
type ProposalTypeRow struct {
	Key, Name                               string
	Current                                 string
	Modes                                   []Option
	Window, MaxWait, MaxItems, DisplayLimit string
	Override                                bool
}

// SimulationResult shows a report: one column per result.
type SimulationResult struct {
	Summary string
	Columns []SimulationColumn
	Rows    []MetricRow
	// Types has one row per type, a cell per column.
	Types []MetricRow
	Chart []ChartBar
	Notes []string
}

// SimulationColumn heads one result.
type SimulationColumn struct {
	Name, Description string
	Actual            bool
}

// MetricRow is one figure across the results.
type MetricRow struct {
	Label  string
	Note   string
	Values []string
}

// ChartBar is one horizontal bar of the emails chart, laid out in an
// 800-wide box: a label on the left, the bar (at most 500 wide) from 220,
// the value after it.
type ChartBar struct {
	Label, Value string
	Y, W         float64
	Actual       bool
}
