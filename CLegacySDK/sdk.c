#include "CLegacySDK.h"
const char *lsdk_status_string(lsdk_status_t status) { (void)status; return "unknown"; }
