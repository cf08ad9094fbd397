module appcheck

go 1.19

require larder v0.0.0

replace larder => ../..
