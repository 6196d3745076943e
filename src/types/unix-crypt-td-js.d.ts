// unix-crypt-td-js ships no types: traditional DES crypt(3), the salt being the first two characters.
declare module "unix-crypt-td-js" {
  export default function unixCryptTD(password: string, salt: string): string;
}
