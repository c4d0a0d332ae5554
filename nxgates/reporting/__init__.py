"""What nxgates tells people and CI: the console lines, the JSON document, JUnit XML, the selftest's kill
table and crosscheck's figure lines. The commands hand results here; nothing here runs a gate."""
