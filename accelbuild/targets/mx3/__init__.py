"""Family mx3: dataflow chips (MemryX MX3-class), modelled: profiles, mapper + cost model, DFP assembler,
dataflow simulator and closed loop."""
