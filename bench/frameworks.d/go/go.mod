module larder.dev/bench/frameworks

go 1.19

require (
	github.com/larder-dev/larder/clients/go v0.0.0
	github.com/mattn/go-sqlite3 v1.14.16
)

replace github.com/larder-dev/larder/clients/go => @CLIENT@

replace github.com/mattn/go-sqlite3 => @SQLITE@
