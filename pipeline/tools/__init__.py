"""The commands around the stages: throughput (`bench`, `capacity`), host checks (`doctor`,
`selftest`) and the devices a training would use (`devices`)."""
