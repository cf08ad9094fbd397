module ahead

go 1.19

require github.com/larder-dev/larder/clients/go v0.0.0

replace github.com/larder-dev/larder/clients/go => ../../../..
