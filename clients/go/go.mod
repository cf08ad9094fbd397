module github.com/larder-dev/larder/clients/go

go 1.19
