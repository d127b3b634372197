q/min_fs = 0
q/max_fs = 255
q/min_ss = 0
q/max_ss = 255
q/corner_x = 
q/corner_y = 
q/fs = +1.0x
q/ss = +1.0y
