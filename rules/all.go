package rules

// catalog is every rule, sorted by ID (TestCatalog checks the order). Adding
// a rule is one value in one rules_*.go file, one line here, and one
// testdata/<ID>/ folder.
var catalog = []*Rule{
	kd101, kd102, kd103, kd104, kd105, kd106, kd107, kd108,
	kd201, kd202, kd203, kd204, kd205, kd206,
	kd301, kd302, kd303, kd304, kd305, kd306, kd307, kd308,
	kd401, kd402, kd403, kd404, kd405, kd406, kd407, kd408, kd409, kd410, kd411, kd412,
	kd501, kd502,
	kd901, kd902, kd903,
}
