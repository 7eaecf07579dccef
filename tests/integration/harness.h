/* placeholder */
#ifndef H
#define H
#endif
