module larder

go 1.19
